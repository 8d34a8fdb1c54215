//! AMD (and Hygon, whose cards use the same KFD + DRM nodes).
//!
//! | mode | container gets |
//! |---|---|
//! | exclusive, shared, visibility | device nodes `/dev/kfd`, `/dev/dri/card<N>`, `/dev/dri/renderD<M>` (`physicalIndexes` `[N, M]`), `AMD_VISIBLE_DEVICES=none` so that no AMD runtime adds others |
//! | sliced | the above plus `ROCR_VISIBLE_DEVICES=<GPU-…>`, `VROCM_DEVICE_MEMORY_LIMIT_<i>=<MiB>`, `VROCM_LEDGER_PATH`, `HSA_CU_MASK=<i>:<cu runs>;…`, `LIBVROCM_LOG_LEVEL=1`*; the preload file, `/usr/local/vrocm/{libvrocm.so,rocm-monitor,rocm-cumask-check}`, the pod's `/run/vrocm` |
//!
//! Hygon: the same nodes for exclusive, shared and visibility; its sliced (`vdev<i>.conf`) and
//! partitioned injections are not built here.

use gpustack_api::{
    Manufacturer,
    devices::{AllocationMode, Placement},
};

use super::{Context, Grant, Injection, InjectionError, join};

const VROCM_DIR: &str = "/usr/local/vrocm";
const VROCM_RUN: &str = "/var/run/vrocm";

pub(crate) fn inject(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    match ctx.mode {
        AllocationMode::Exclusive | AllocationMode::Shared | AllocationMode::Visibility => {
            drm_nodes(ctx, out)?;
            out.env("AMD_VISIBLE_DEVICES", "none");
            Ok(())
        }
        AllocationMode::Sliced => {
            drm_nodes(ctx, out)?;
            out.env("AMD_VISIBLE_DEVICES", "none");
            vrocm(ctx, out);
            Ok(())
        }
        _ => Err(ctx.unsupported(Manufacturer::Amd)),
    }
}

pub(crate) fn inject_hygon(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    match ctx.mode {
        AllocationMode::Exclusive | AllocationMode::Shared | AllocationMode::Visibility => {
            drm_nodes(ctx, out)
        }
        _ => Err(ctx.unsupported(Manufacturer::Hygon)),
    }
}

/// `/dev/kfd` once, then each card's DRM nodes.
fn drm_nodes(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    drm_nodes_with(ctx, out, "/dev/kfd")
}

/// The `control` node once, then each card's DRM card and render nodes (`physicalIndexes`
/// `[card, render]`): AMD's and Hygon's layout, and MetaX's with its own control node.
pub(crate) fn drm_nodes_with(
    ctx: &Context<'_>,
    out: &mut Injection,
    control: &str,
) -> Result<(), InjectionError> {
    out.device(control);
    for g in ctx.grants {
        let p = &g.accelerator.physical_indexes;
        let card = p
            .first()
            .ok_or_else(|| InjectionError::MissingPhysicalIndex {
                id: g.accelerator.id.clone(),
                what: "its /dev/dri/card node",
            })?;
        out.device(format!("/dev/dri/card{card}"));
        if let Some(render) = p.get(1) {
            out.device(format!("/dev/dri/renderD{render}"));
        }
    }
    Ok(())
}

fn vrocm(ctx: &Context<'_>, out: &mut Injection) {
    let Some(slice) = ctx.slice else { return };
    out.env("ROCR_VISIBLE_DEVICES", ctx.ids());
    for i in 0..ctx.grants.len() {
        out.env(
            format!("VROCM_DEVICE_MEMORY_LIMIT_{i}"),
            slice.memory_mib.to_string(),
        );
    }
    out.env("VROCM_LEDGER_PATH", format!("{VROCM_RUN}/ledger"));
    let masks: Vec<String> = ctx
        .grants
        .iter()
        .enumerate()
        .filter_map(|(i, g)| cu_runs(g, slice.cores_percentage).map(|runs| format!("{i}:{runs}")))
        .collect();
    if !masks.is_empty() {
        out.env("HSA_CU_MASK", masks.join(";"));
    }
    out.env_default(ctx.own_env, "LIBVROCM_LOG_LEVEL", "1");
    let lib = ctx.manufacturer_lib(Manufacturer::Amd);
    out.mount_ro(format!("{lib}/ld.so.preload"), "/etc/ld.so.preload");
    for file in ["libvrocm.so", "rocm-monitor", "rocm-cumask-check"] {
        out.mount_ro(format!("{lib}/{file}"), format!("{VROCM_DIR}/{file}"));
    }
    let run = format!("{}/run/vrocm", ctx.pod_work_dir);
    out.mount_rw(run.clone(), VROCM_RUN);
    out.work_dirs.push(run);
}

/// The compute units a slice may run on, as `a-b,c-d` runs. The allocator's placement wins;
/// without one, the first `ceil(cores × pct / 100)` units (needs the card's CU count).
fn cu_runs(grant: &Grant<'_>, cores_percentage: u32) -> Option<String> {
    let fallback;
    let placements: &[Placement] = if grant.cu_placements.is_empty() {
        let cores = grant.group.cores?;
        let length = (u64::from(cores) * u64::from(cores_percentage)).div_ceil(100) as u32;
        fallback = [Placement {
            start: 0,
            length: length.max(1),
        }];
        &fallback
    } else {
        grant.cu_placements
    };
    let runs = placements
        .iter()
        .filter(|p| p.length > 0)
        .map(|p| match p.length {
            1 => p.start.to_string(),
            n => format!("{}-{}", p.start, p.start + n - 1),
        });
    let runs = join(runs);
    (!runs.is_empty()).then_some(runs)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use gpustack_api::devices::AllocationMode::{Exclusive, Shared, Sliced, Visibility};

    use super::super::{fixtures::*, *};
    use super::cu_runs;

    const LIB: &str = "/var/lib/gpustack/operator/lib/amd";
    const WORK: &str = "/var/lib/gpustack/operator/pods/uid-1/c-main";

    fn cards() -> DevicesGroup {
        group(
            Manufacturer::Amd,
            "7.2",
            "GC 11.0.0",
            vec![
                card("GPU-5c88007d760374f3", 0, &[1, 128]),
                card("GPU-77aa", 1, &[2, 129]),
            ],
        )
    }

    fn nodes(paths: &[&str]) -> Vec<DeviceNode> {
        paths
            .iter()
            .map(|p| DeviceNode {
                host_path: (*p).to_owned(),
                container_path: (*p).to_owned(),
                permissions: "rw".to_owned(),
            })
            .collect()
    }

    #[test]
    fn whole_card_modes_pass_kfd_and_drm_nodes() {
        let g = cards();
        let own = BTreeSet::new();
        for mode in [Exclusive, Shared, Visibility] {
            let got = inject(
                &request(
                    Manufacturer::Amd,
                    mode,
                    vec![
                        Grant::card(&g, &g.accelerators[1]),
                        Grant::card(&g, &g.accelerators[0]),
                    ],
                    None,
                    &own,
                ),
                &NodeFacts::default(),
            )
            .unwrap();
            assert_eq!(
                got,
                Injection {
                    envs: envs(&[("AMD_VISIBLE_DEVICES", "none")]),
                    devices: nodes(&[
                        "/dev/kfd",
                        "/dev/dri/card1",
                        "/dev/dri/renderD128",
                        "/dev/dri/card2",
                        "/dev/dri/renderD129",
                    ]),
                    ..Injection::default()
                },
                "{mode:?}"
            );
        }
    }

    #[test]
    fn sliced_gets_every_variable_and_mount() {
        let g = cards();
        let own = BTreeSet::new();
        let window = [Placement {
            start: 30,
            length: 30,
        }];
        let grant = Grant {
            cu_placements: &window,
            ..Grant::card(&g, &g.accelerators[0])
        };
        let got = inject(
            &request(
                Manufacturer::Amd,
                Sliced,
                vec![grant],
                Some(SliceLimits {
                    cores_percentage: 50,
                    memory_mib: 8184,
                }),
                &own,
            ),
            &NodeFacts::default(),
        )
        .unwrap();
        assert_eq!(
            got.envs,
            envs(&[
                ("AMD_VISIBLE_DEVICES", "none"),
                ("ROCR_VISIBLE_DEVICES", "GPU-5c88007d760374f3"),
                ("VROCM_DEVICE_MEMORY_LIMIT_0", "8184"),
                ("VROCM_LEDGER_PATH", "/var/run/vrocm/ledger"),
                ("HSA_CU_MASK", "0:30-59"),
                ("LIBVROCM_LOG_LEVEL", "1"),
            ])
        );
        assert_eq!(
            got.mounts,
            vec![
                mount(&format!("{LIB}/ld.so.preload"), "/etc/ld.so.preload", true),
                mount(
                    &format!("{LIB}/libvrocm.so"),
                    "/usr/local/vrocm/libvrocm.so",
                    true
                ),
                mount(
                    &format!("{LIB}/rocm-monitor"),
                    "/usr/local/vrocm/rocm-monitor",
                    true
                ),
                mount(
                    &format!("{LIB}/rocm-cumask-check"),
                    "/usr/local/vrocm/rocm-cumask-check",
                    true
                ),
                mount(&format!("{WORK}/run/vrocm"), "/var/run/vrocm", false),
            ]
        );
        assert_eq!(
            got.devices,
            nodes(&["/dev/kfd", "/dev/dri/card1", "/dev/dri/renderD128"])
        );
        assert_eq!(got.work_dirs, vec![format!("{WORK}/run/vrocm")]);
    }

    #[test]
    fn cu_mask_without_placement_takes_the_first_units() {
        let g = cards();
        for (pct, want) in [(50, "0-29"), (100, "0-59"), (1, "0"), (33, "0-19")] {
            assert_eq!(
                cu_runs(&Grant::card(&g, &g.accelerators[0]), pct).as_deref(),
                Some(want),
                "{pct}"
            );
        }
        let mut unknown = cards();
        unknown.cores = None;
        assert_eq!(
            cu_runs(&Grant::card(&unknown, &unknown.accelerators[0]), 50),
            None
        );
    }

    #[test]
    fn hygon_whole_card_only() {
        let g = group(
            Manufacturer::Hygon,
            "",
            "",
            vec![card("DCU-1", 0, &[1, 128])],
        );
        let own = BTreeSet::new();
        let ok = inject(
            &request(
                Manufacturer::Hygon,
                Exclusive,
                vec![Grant::card(&g, &g.accelerators[0])],
                None,
                &own,
            ),
            &NodeFacts::default(),
        )
        .unwrap();
        assert!(ok.envs.is_empty());
        assert_eq!(ok.devices.len(), 3);
        let sliced = inject(
            &request(
                Manufacturer::Hygon,
                Sliced,
                vec![Grant::card(&g, &g.accelerators[0])],
                Some(SliceLimits {
                    cores_percentage: 50,
                    memory_mib: 1,
                }),
                &own,
            ),
            &NodeFacts::default(),
        );
        assert!(matches!(sliced, Err(InjectionError::Unsupported { .. })));
    }

    #[test]
    fn a_card_without_physical_index_is_refused() {
        let g = group(Manufacturer::Amd, "7.2", "", vec![card("GPU-x", 0, &[])]);
        let own = BTreeSet::new();
        let got = inject(
            &request(
                Manufacturer::Amd,
                Exclusive,
                vec![Grant::card(&g, &g.accelerators[0])],
                None,
                &own,
            ),
            &NodeFacts::default(),
        );
        assert!(matches!(
            got,
            Err(InjectionError::MissingPhysicalIndex { .. })
        ));
    }
}
