//! Cambricon, MetaX and MThreads: whole-card modes as the reference table gives them, and
//! MThreads' sliced variables (the one sliced row of these three that needs no device I/O).
//! T-Head is in [`super::thead`].
//!
//! | mfr | exclusive, shared, visibility | sliced |
//! |---|---|---|
//! | cambricon | `/dev/cambricon_ctl` + `/dev/cambricon_dev<i>`, `CAMBRICON_VISIBLE_DEVICES=<i,…>` | not built (sMLU instances are created through cnDev) |
//! | metax | `/dev/mxcd` + `/dev/dri/card<N>` + `/dev/dri/renderD<M>` | not built (sGPU quota is written to sysfs) |
//! | mthreads | `MTHREADS_VISIBLE_DEVICES=<index,…>` (the `mthreads` runtime adds nodes) | adds `MTHREADS_QOS_MEMORY_LIMIT` (bytes), `MTHREADS_QOS_COMPUTING_POWER_WEIGHT` (cores %, a weight) |

use gpustack_api::{Manufacturer, devices::AllocationMode};

use super::{Context, Injection, InjectionError};

fn whole_card(mode: AllocationMode) -> bool {
    matches!(
        mode,
        AllocationMode::Exclusive | AllocationMode::Shared | AllocationMode::Visibility
    )
}

pub(crate) fn inject_cambricon(
    ctx: &Context<'_>,
    out: &mut Injection,
) -> Result<(), InjectionError> {
    if !whole_card(ctx.mode) {
        return Err(ctx.unsupported(Manufacturer::Cambricon));
    }
    let cards = ctx.first_physical("its /dev/cambricon_dev node")?;
    out.device("/dev/cambricon_ctl");
    for i in &cards {
        out.device(format!("/dev/cambricon_dev{i}"));
    }
    out.env(
        "CAMBRICON_VISIBLE_DEVICES",
        super::join(cards.iter().map(u32::to_string)),
    );
    Ok(())
}

pub(crate) fn inject_metax(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    if !whole_card(ctx.mode) {
        return Err(ctx.unsupported(Manufacturer::Metax));
    }
    super::amd::drm_nodes_with(ctx, out, "/dev/mxcd")
}

pub(crate) fn inject_mthreads(
    ctx: &Context<'_>,
    out: &mut Injection,
) -> Result<(), InjectionError> {
    match (ctx.mode, ctx.slice) {
        (mode, _) if whole_card(mode) => {
            out.env("MTHREADS_VISIBLE_DEVICES", ctx.indexes());
            Ok(())
        }
        (AllocationMode::Sliced, Some(slice)) => {
            out.env("MTHREADS_VISIBLE_DEVICES", ctx.indexes());
            out.env(
                "MTHREADS_QOS_MEMORY_LIMIT",
                (slice.memory_mib * 1024 * 1024).to_string(),
            );
            out.env(
                "MTHREADS_QOS_COMPUTING_POWER_WEIGHT",
                slice.cores_percentage.to_string(),
            );
            Ok(())
        }
        _ => Err(ctx.unsupported(Manufacturer::Mthreads)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use gpustack_api::devices::AllocationMode::{Exclusive, Partitioned, Shared, Sliced};

    use super::super::{fixtures::*, *};

    fn run(
        m: Manufacturer,
        mode: AllocationMode,
        slice: Option<SliceLimits>,
    ) -> Result<Injection, InjectionError> {
        let own = BTreeSet::new();
        let g = group(
            m,
            "1.0",
            "",
            vec![card("c-1", 1, &[1, 129]), card("c-0", 0, &[0, 128])],
        );
        let grants = g.accelerators.iter().map(|a| Grant::card(&g, a)).collect();
        inject(
            &request(m, mode, grants, slice, &own),
            &NodeFacts::default(),
        )
    }

    fn paths(i: &Injection) -> Vec<&str> {
        i.devices.iter().map(|d| d.host_path.as_str()).collect()
    }

    #[test]
    fn whole_card_table() {
        let c = run(Manufacturer::Cambricon, Shared, None).unwrap();
        assert_eq!(
            paths(&c),
            [
                "/dev/cambricon_ctl",
                "/dev/cambricon_dev0",
                "/dev/cambricon_dev1"
            ]
        );
        assert_eq!(c.envs, envs(&[("CAMBRICON_VISIBLE_DEVICES", "0,1")]));

        let x = run(Manufacturer::Metax, Exclusive, None).unwrap();
        assert_eq!(
            paths(&x),
            [
                "/dev/mxcd",
                "/dev/dri/card0",
                "/dev/dri/renderD128",
                "/dev/dri/card1",
                "/dev/dri/renderD129"
            ]
        );
        assert!(x.envs.is_empty());

        let mt = run(Manufacturer::Mthreads, Exclusive, None).unwrap();
        assert_eq!(mt.envs, envs(&[("MTHREADS_VISIBLE_DEVICES", "0,1")]));
        assert!(mt.devices.is_empty());
    }

    #[test]
    fn mthreads_sliced_sets_bytes_and_weight() {
        let got = run(
            Manufacturer::Mthreads,
            Sliced,
            Some(SliceLimits {
                cores_percentage: 30,
                memory_mib: 2048,
            }),
        )
        .unwrap();
        assert_eq!(
            got.envs,
            envs(&[
                ("MTHREADS_VISIBLE_DEVICES", "0,1"),
                ("MTHREADS_QOS_MEMORY_LIMIT", "2147483648"),
                ("MTHREADS_QOS_COMPUTING_POWER_WEIGHT", "30"),
            ])
        );
    }

    #[test]
    fn unbuilt_modes_are_refused_by_name() {
        let half = Some(SliceLimits {
            cores_percentage: 50,
            memory_mib: 1,
        });
        for m in [Manufacturer::Cambricon, Manufacturer::Metax] {
            let err = run(m, Sliced, half).unwrap_err();
            assert_eq!(err.to_string(), format!("{m} has no sliced injection"));
        }
        assert!(run(Manufacturer::Mthreads, Partitioned, None).is_err());
    }
}
