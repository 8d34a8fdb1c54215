//! T-Head PPUs: the card's node plus the two shared control nodes in every mode (the vendor has
//! no container-runtime hook), and for a logical slice the PPU slicing shim's quota and its
//! mounts (devices.md §5.1).
//!
//! | mode | container gets |
//! |---|---|
//! | exclusive, shared, visibility | `/dev/alixpu_ppu<minor>` per card, `/dev/alixpu`, `/dev/alixpu_ctl`; no environment |
//! | sliced | the same nodes; `HGGC_DEVICE_SM_LIMIT=<cores %>` (un-indexed, emitted even at 100: the shim reads a missing figure as an unusable card), `HGGC_DEVICE_MEMORY_LIMIT_<i>=<MiB>` (bare, `<i>` the position in index order), `HGGC_LEDGER_PATH=/var/run/vppu/ledger`, `LIBHGGC_LOG_LEVEL=1`*; the preload file at `/etc/ld.so.preload`, `hgml_dlsym_hook.so`, `hggc_quota.so` and `ppu-monitor` under `/usr/local/vppu` (all read-only, from `<lib dir>/thead/`), and the container's own `<work dir>/run/vppu` at `/var/run/vppu` (read-write: the shim's usage region is per container) |

use gpustack_api::{Manufacturer, devices::AllocationMode};

use super::{Context, Injection, InjectionError};

const VPPU_DIR: &str = "/usr/local/vppu";
const VPPU_RUN: &str = "/var/run/vppu";
/// The shim's files staged under `<lib dir>/thead/`, mounted under [`VPPU_DIR`].
const VPPU_FILES: [&str; 3] = ["hgml_dlsym_hook.so", "hggc_quota.so", "ppu-monitor"];

pub(crate) fn inject(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    match ctx.mode {
        AllocationMode::Exclusive | AllocationMode::Shared | AllocationMode::Visibility => {
            nodes(ctx, out)
        }
        AllocationMode::Sliced => {
            let slice = ctx.slice.ok_or(InjectionError::MissingSliceLimits)?;
            nodes(ctx, out)?;
            out.env("HGGC_DEVICE_SM_LIMIT", slice.cores_percentage.to_string());
            for i in 0..ctx.grants.len() {
                out.env(
                    format!("HGGC_DEVICE_MEMORY_LIMIT_{i}"),
                    slice.memory_mib.to_string(),
                );
            }
            out.env("HGGC_LEDGER_PATH", format!("{VPPU_RUN}/ledger"));
            out.env_default(ctx.own_env, "LIBHGGC_LOG_LEVEL", "1");
            let lib = ctx.manufacturer_lib(Manufacturer::Thead);
            out.mount_ro(format!("{lib}/ld.so.preload"), "/etc/ld.so.preload");
            for file in VPPU_FILES {
                out.mount_ro(format!("{lib}/{file}"), format!("{VPPU_DIR}/{file}"));
            }
            let run = format!("{}/run/vppu", ctx.pod_work_dir);
            out.mount_rw(run.clone(), VPPU_RUN);
            out.work_dirs.push(run);
            Ok(())
        }
        _ => Err(ctx.unsupported(Manufacturer::Thead)),
    }
}

/// Each card's `/dev/alixpu_ppu<minor>` (a card whose minor number is unknown is refused, never
/// answered with a neighbour's node), then the shared control nodes.
fn nodes(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    for minor in ctx.first_physical("its /dev/alixpu_ppu node")? {
        out.device(format!("/dev/alixpu_ppu{minor}"));
    }
    out.device("/dev/alixpu");
    out.device("/dev/alixpu_ctl");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use gpustack_api::devices::AllocationMode::{Partitioned, Sliced, Visibility};

    use super::super::{fixtures::*, *};

    const LIB: &str = "/var/lib/gpustack/operator/lib/thead";
    const WORK: &str = "/var/lib/gpustack/operator/pods/uid-1/c-main";

    fn run(
        mode: AllocationMode,
        slice: Option<SliceLimits>,
        own: &BTreeSet<String>,
        cards: Vec<Accelerator>,
    ) -> Result<Injection, InjectionError> {
        let g = group(Manufacturer::Thead, "13.0", "", cards);
        let grants = g.accelerators.iter().map(|a| Grant::card(&g, a)).collect();
        inject(
            &request(Manufacturer::Thead, mode, grants, slice, own),
            &NodeFacts::default(),
        )
    }

    fn quarter() -> Option<SliceLimits> {
        Some(SliceLimits {
            cores_percentage: 10,
            memory_mib: 24_576,
        })
    }

    #[test]
    fn sliced_gets_every_variable_and_mount() {
        let own = BTreeSet::new();
        let got = run(Sliced, quarter(), &own, vec![card("ppu-a", 0, &[1])]).unwrap();
        assert_eq!(
            got.envs,
            envs(&[
                ("HGGC_DEVICE_SM_LIMIT", "10"),
                ("HGGC_DEVICE_MEMORY_LIMIT_0", "24576"),
                ("HGGC_LEDGER_PATH", "/var/run/vppu/ledger"),
                ("LIBHGGC_LOG_LEVEL", "1"),
            ])
        );
        assert_eq!(
            got.mounts,
            [
                mount(&format!("{LIB}/ld.so.preload"), "/etc/ld.so.preload", true),
                mount(
                    &format!("{LIB}/hgml_dlsym_hook.so"),
                    "/usr/local/vppu/hgml_dlsym_hook.so",
                    true
                ),
                mount(
                    &format!("{LIB}/hggc_quota.so"),
                    "/usr/local/vppu/hggc_quota.so",
                    true
                ),
                mount(
                    &format!("{LIB}/ppu-monitor"),
                    "/usr/local/vppu/ppu-monitor",
                    true
                ),
                mount(&format!("{WORK}/run/vppu"), "/var/run/vppu", false),
            ]
        );
        assert_eq!(got.work_dirs, [format!("{WORK}/run/vppu")]);
        let nodes: Vec<&str> = got.devices.iter().map(|d| d.host_path.as_str()).collect();
        assert_eq!(
            nodes,
            ["/dev/alixpu_ppu1", "/dev/alixpu", "/dev/alixpu_ctl"]
        );
    }

    #[test]
    fn compute_is_emitted_at_100_and_a_declared_log_level_is_kept() {
        let own: BTreeSet<String> = ["LIBHGGC_LOG_LEVEL".to_owned()].into();
        let whole = Some(SliceLimits {
            cores_percentage: 100,
            memory_mib: 98_304,
        });
        let got = run(
            Sliced,
            whole,
            &own,
            vec![card("ppu-b", 1, &[0]), card("ppu-a", 0, &[1])],
        )
        .unwrap();
        assert_eq!(got.envs["HGGC_DEVICE_SM_LIMIT"], "100");
        assert_eq!(got.envs["HGGC_DEVICE_MEMORY_LIMIT_0"], "98304");
        assert_eq!(got.envs["HGGC_DEVICE_MEMORY_LIMIT_1"], "98304");
        assert!(!got.envs.contains_key("LIBHGGC_LOG_LEVEL"));
        // Nodes follow index order.
        let nodes: Vec<&str> = got.devices.iter().map(|d| d.host_path.as_str()).collect();
        assert_eq!(
            nodes,
            [
                "/dev/alixpu_ppu1",
                "/dev/alixpu_ppu0",
                "/dev/alixpu",
                "/dev/alixpu_ctl"
            ]
        );
    }

    #[test]
    fn a_card_without_a_minor_is_refused_and_partitions_are_not_injected_here() {
        let own = BTreeSet::new();
        let err = run(Sliced, quarter(), &own, vec![card("ppu-x", 0, &[])]).unwrap_err();
        assert_eq!(
            err,
            InjectionError::MissingPhysicalIndex {
                id: "ppu-x".into(),
                what: "its /dev/alixpu_ppu node"
            }
        );
        assert!(run(Sliced, None, &own, vec![card("ppu-a", 0, &[1])]).is_err());
        assert!(run(Partitioned, None, &own, vec![card("ppu-a", 0, &[1])]).is_err());
        let seen = run(Visibility, None, &own, vec![card("ppu-a", 0, &[1])]).unwrap();
        assert!(seen.envs.is_empty() && seen.mounts.is_empty());
    }
}
