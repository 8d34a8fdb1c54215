//! Huawei Ascend.
//!
//! | mode | container gets |
//! |---|---|
//! | exclusive, shared, visibility | `ASCEND_VISIBLE_DEVICES=<physical id,…>` (family 950: the card id); the `ascend` runtime adds the nodes |
//! | sliced (one NPU) | the above plus vcann-rt: `libvruntime.so` of `cann-<major>-<family>`, a rendered `npu_info.config` (`aicore-quota`, `memory-quota`, `physical-npu-id`), the preload file, `enpu-monitor`; `ENPU_LOG_LEVEL=1`*, `ENPU_DSMI_HOOK=1`* |
//!
//! Turning on the driver's container-share flag is device I/O and stays with the plugin.

use gpustack_api::{Manufacturer, devices::AllocationMode};

use super::{Context, Grant, Injection, InjectionError, RenderedFile, join, major};

const VCANN_DIR: &str = "/opt/enpu/vcann-rt";
/// Where vcann-rt reads its quota inside the container.
pub const NPU_INFO_CONFIG: &str = "/etc/enpu/vcann-rt/npu_info.config";

pub(crate) fn inject(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    match ctx.mode {
        AllocationMode::Exclusive | AllocationMode::Shared | AllocationMode::Visibility => {
            let ids = ctx
                .grants
                .iter()
                .map(visible_id)
                .collect::<Result<Vec<_>, _>>()?;
            out.env(
                "ASCEND_VISIBLE_DEVICES",
                join(ids.iter().map(u32::to_string)),
            );
            Ok(())
        }
        AllocationMode::Sliced => sliced(ctx, out),
        _ => Err(ctx.unsupported(Manufacturer::Ascend)),
    }
}

/// The id the Ascend runtime takes: the physical id, or on the 950 family the card id.
fn visible_id(g: &Grant<'_>) -> Result<u32, InjectionError> {
    let position = usize::from(g.group.family == "950");
    g.accelerator
        .physical_indexes
        .get(position)
        .copied()
        .ok_or_else(|| InjectionError::MissingPhysicalIndex {
            id: g.accelerator.id.clone(),
            what: "ASCEND_VISIBLE_DEVICES",
        })
}

fn sliced(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    let grant = ctx.single(Manufacturer::Ascend)?;
    let Some(slice) = ctx.slice else {
        return Err(InjectionError::MissingSliceLimits);
    };
    let id = visible_id(grant)?;
    let cann = major(&grant.group.runtime_version)
        .ok_or_else(|| InjectionError::UnknownRuntimeMajor(grant.accelerator.id.clone()))?;
    let family = grant.group.family.to_ascii_lowercase();
    out.env("ASCEND_VISIBLE_DEVICES", id.to_string());
    out.env_default(ctx.own_env, "ENPU_LOG_LEVEL", "1");
    out.env_default(ctx.own_env, "ENPU_DSMI_HOOK", "1");
    let lib = ctx.manufacturer_lib(Manufacturer::Ascend);
    out.mount_ro(
        format!("{lib}/cann-{cann}-{family}/lib/libvruntime.so"),
        format!("{VCANN_DIR}/lib/libvruntime.so"),
    );
    let config_dir = format!("{}/etc/enpu", ctx.pod_work_dir);
    let config = format!("{config_dir}/npu_info.config");
    out.files.push(RenderedFile {
        host_path: config.clone(),
        contents: format!(
            "aicore-quota={}\nmemory-quota={}\nphysical-npu-id={id}\n",
            slice.cores_percentage, slice.memory_mib
        ),
    });
    out.work_dirs.push(config_dir);
    out.mount_ro(config, NPU_INFO_CONFIG);
    out.mount_ro(format!("{lib}/ld.so.preload"), "/etc/ld.so.preload");
    out.mount_ro(
        format!("{lib}/enpu-monitor"),
        format!("{VCANN_DIR}/tools/enpu-monitor"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use gpustack_api::devices::AllocationMode::{Exclusive, Sliced};

    use super::super::{fixtures::*, *};

    const WORK: &str = "/var/lib/gpustack/operator/pods/uid-1/c-main";

    #[test]
    fn whole_card_names_physical_or_card_ids() {
        let own = BTreeSet::new();
        let b = group(
            Manufacturer::Ascend,
            "8.0.RC1",
            "910B",
            vec![card("die-1", 0, &[4, 2, 0]), card("die-2", 1, &[5, 2, 1])],
        );
        let a5 = group(
            Manufacturer::Ascend,
            "9.0",
            "950",
            vec![card("die-9", 0, &[7, 3, 0])],
        );
        for (g, want) in [(&b, "4,5"), (&a5, "3")] {
            let grants = g.accelerators.iter().map(|a| Grant::card(g, a)).collect();
            let got = inject(
                &request(Manufacturer::Ascend, Exclusive, grants, None, &own),
                &NodeFacts::default(),
            )
            .unwrap();
            assert_eq!(got.envs, envs(&[("ASCEND_VISIBLE_DEVICES", want)]));
        }
    }

    #[test]
    fn sliced_renders_the_quota_and_mounts_vcann_rt() {
        let own: BTreeSet<String> = ["ENPU_DSMI_HOOK".to_owned()].into();
        let g = group(
            Manufacturer::Ascend,
            "8.0.RC1",
            "910B",
            vec![card("die-1", 0, &[4, 2, 0])],
        );
        let got = inject(
            &request(
                Manufacturer::Ascend,
                Sliced,
                vec![Grant::card(&g, &g.accelerators[0])],
                Some(SliceLimits {
                    cores_percentage: 25,
                    memory_mib: 16384,
                }),
                &own,
            ),
            &NodeFacts::default(),
        )
        .unwrap();
        assert_eq!(
            got.envs,
            envs(&[("ASCEND_VISIBLE_DEVICES", "4"), ("ENPU_LOG_LEVEL", "1")])
        );
        let lib = "/var/lib/gpustack/operator/lib/ascend";
        assert_eq!(
            got.mounts,
            vec![
                mount(
                    &format!("{lib}/cann-8-910b/lib/libvruntime.so"),
                    "/opt/enpu/vcann-rt/lib/libvruntime.so",
                    true
                ),
                mount(
                    &format!("{WORK}/etc/enpu/npu_info.config"),
                    "/etc/enpu/vcann-rt/npu_info.config",
                    true
                ),
                mount(&format!("{lib}/ld.so.preload"), "/etc/ld.so.preload", true),
                mount(
                    &format!("{lib}/enpu-monitor"),
                    "/opt/enpu/vcann-rt/tools/enpu-monitor",
                    true
                ),
            ]
        );
        assert_eq!(
            got.files,
            vec![RenderedFile {
                host_path: format!("{WORK}/etc/enpu/npu_info.config"),
                contents: "aicore-quota=25\nmemory-quota=16384\nphysical-npu-id=4\n".into(),
            }]
        );
    }

    #[test]
    fn sliced_takes_one_npu() {
        let own = BTreeSet::new();
        let g = group(
            Manufacturer::Ascend,
            "8.0",
            "910B",
            vec![card("d1", 0, &[0, 0, 0]), card("d2", 1, &[1, 0, 1])],
        );
        let got = inject(
            &request(
                Manufacturer::Ascend,
                Sliced,
                g.accelerators.iter().map(|a| Grant::card(&g, a)).collect(),
                Some(SliceLimits {
                    cores_percentage: 25,
                    memory_mib: 1,
                }),
                &own,
            ),
            &NodeFacts::default(),
        );
        assert_eq!(
            got,
            Err(InjectionError::SingleAcceleratorOnly {
                manufacturer: Manufacturer::Ascend,
                count: 2
            })
        );
    }
}
