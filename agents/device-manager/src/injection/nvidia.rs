//! NVIDIA (and Iluvatar, whose slicing is the same HAMi-core shim).
//!
//! | mode | container gets |
//! |---|---|
//! | exclusive, shared, visibility | `NVIDIA_VISIBLE_DEVICES=<uuid,…>`, or under the CDI strategy the annotation `cdi.k8s.io/gpustack-nvidia: nvidia.com/gpu=<uuid>,…` |
//! | sliced | the above plus `CUDA_DEVICE_SM_LIMIT`, `CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m`, `CUDA_DEVICE_MEMORY_SHARED_CACHE`, `LIBCUDA_LOG_LEVEL=0`*, `CUDA_DEVICE_ORDER=PCI_BUS_ID`*; the preload file, `libvgpu.so` of the CUDA major, `/tmp/vgpulock`, the pod's `/tmp/vgpu`, `/dev/shm` |
//! | partitioned | `NVIDIA_VISIBLE_DEVICES=<MIG UUID,…>` (always the variable) |
//!
//! Iluvatar: `IX_VISIBLE_DEVICES=<index,…>` (read by `ix-container-runtime`); sliced adds the same
//! HAMi-core set, from the cuda-12 build.

use gpustack_api::{Manufacturer, devices::AllocationMode};

use super::{Context, Injection, InjectionError, join, shared_major};

/// The CDI annotation key the NVIDIA runtime reads under the `cdi-annotations` strategy.
pub const CDI_ANNOTATION: &str = "cdi.k8s.io/gpustack-nvidia";
/// The CDI kind of a whole NVIDIA GPU.
pub const CDI_KIND: &str = "nvidia.com/gpu";
/// Where HAMi-core keeps its shared accounting inside the container.
const SHARED_CACHE: &str = "/tmp/vgpu/cudevshr.cache";

pub(crate) fn inject(ctx: &Context<'_>, out: &mut Injection) -> Result<(), InjectionError> {
    match ctx.mode {
        AllocationMode::Partitioned => {
            let ids = ctx
                .grants
                .iter()
                .map(|g| {
                    g.partition_id
                        .filter(|id| !id.is_empty())
                        .ok_or_else(|| InjectionError::MissingPartitionId(g.accelerator.id.clone()))
                })
                .collect::<Result<Vec<_>, _>>()?;
            out.env("NVIDIA_VISIBLE_DEVICES", join(ids));
            Ok(())
        }
        AllocationMode::None => Err(ctx.unsupported(Manufacturer::Nvidia)),
        _ => {
            match ctx.node.nvidia_strategy {
                super::NvidiaStrategy::EnvVar => out.env("NVIDIA_VISIBLE_DEVICES", ctx.ids()),
                super::NvidiaStrategy::CdiAnnotations => {
                    out.annotations.insert(
                        CDI_ANNOTATION.to_owned(),
                        join(
                            ctx.grants
                                .iter()
                                .map(|g| format!("{CDI_KIND}={}", g.accelerator.id)),
                        ),
                    );
                }
            }
            if ctx.mode == AllocationMode::Sliced {
                let major = shared_major(ctx.grants)?;
                hami_core(ctx, out, Manufacturer::Nvidia, major);
            }
            Ok(())
        }
    }
}

pub(crate) fn inject_iluvatar(
    ctx: &Context<'_>,
    out: &mut Injection,
) -> Result<(), InjectionError> {
    match ctx.mode {
        AllocationMode::Exclusive | AllocationMode::Shared | AllocationMode::Visibility => {
            out.env("IX_VISIBLE_DEVICES", ctx.indexes());
            Ok(())
        }
        AllocationMode::Sliced => {
            out.env("IX_VISIBLE_DEVICES", ctx.indexes());
            // The image ships Iluvatar's HAMi-core from the cuda-12 build only.
            hami_core(ctx, out, Manufacturer::Iluvatar, "12");
            Ok(())
        }
        _ => Err(ctx.unsupported(Manufacturer::Iluvatar)),
    }
}

/// HAMi-core's variables and mounts for a sliced container.
fn hami_core(ctx: &Context<'_>, out: &mut Injection, m: Manufacturer, cuda_major: &str) {
    let Some(slice) = ctx.slice else { return };
    out.env("CUDA_DEVICE_SM_LIMIT", slice.cores_percentage.to_string());
    for i in 0..ctx.grants.len() {
        out.env(
            format!("CUDA_DEVICE_MEMORY_LIMIT_{i}"),
            format!("{}m", slice.memory_mib),
        );
    }
    out.env("CUDA_DEVICE_MEMORY_SHARED_CACHE", SHARED_CACHE);
    out.env_default(ctx.own_env, "LIBCUDA_LOG_LEVEL", "0");
    out.env_default(ctx.own_env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    let lib = ctx.manufacturer_lib(m);
    out.mount_ro(format!("{lib}/ld.so.preload"), "/etc/ld.so.preload");
    out.mount_ro(
        format!("{lib}/cuda-{cuda_major}/libvgpu.so"),
        "/usr/local/vgpu/libvgpu.so",
    );
    out.mount_rw("/tmp/vgpulock", "/tmp/vgpulock");
    let vgpu = format!("{}/tmp/vgpu", ctx.pod_work_dir);
    out.mount_rw(vgpu.clone(), "/tmp/vgpu");
    out.work_dirs.push(vgpu);
    out.mount_rw("/dev/shm", "/dev/shm");
}

/// `GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY` names no strategy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid value '{0}' for GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY: must be envvar, cdi-annotations or auto"
)]
pub struct UnknownStrategy(pub String);

/// Where `auto` looks for containerd's configuration unless `GPUSTACK_CONTAINERD_CONFIG_DIR`
/// says otherwise.
pub const DEFAULT_CONTAINERD_CONFIG_DIR: &str = "/etc/containerd";

/// The strategy a setting names. `auto` is decided here, once, from containerd's
/// `config.toml` (`containerd_config` reads it; `None` when the node has none): see
/// [`auto_strategy`].
pub fn strategy(
    setting: Option<&str>,
    containerd_config: impl FnOnce() -> Option<String>,
) -> Result<super::NvidiaStrategy, UnknownStrategy> {
    match setting.map(str::trim) {
        None | Some("" | "envvar") => Ok(super::NvidiaStrategy::EnvVar),
        Some("cdi-annotations") => Ok(super::NvidiaStrategy::CdiAnnotations),
        Some("auto") => Ok(auto_strategy(containerd_config().as_deref())),
        Some(other) => Err(UnknownStrategy(other.to_owned())),
    }
}

/// `auto`: the CDI annotation where the node's containerd resolves CDI devices from annotations,
/// else the variable (which the NVIDIA runtime reads).
///
/// containerd's CRI plugin reads CDI annotations when `enable_cdi` is on. An explicit
/// `enable_cdi = true|false` anywhere in the file decides; without one the default of the
/// config's schema does: on from `version = 3` (containerd 2.x), off before (1.x, whose
/// `version = 2` files and version-less files leave it off). No file: the variable.
pub fn auto_strategy(containerd_config: Option<&str>) -> super::NvidiaStrategy {
    let Some(text) = containerd_config else {
        return super::NvidiaStrategy::EnvVar;
    };
    let mut version = 1u32;
    let mut enable_cdi = None;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match (key.trim(), value.trim()) {
            ("version", v) => version = v.parse().unwrap_or(version),
            ("enable_cdi", "true") => enable_cdi = Some(true),
            ("enable_cdi", "false") => enable_cdi = Some(false),
            _ => {}
        }
    }
    if enable_cdi.unwrap_or(version >= 3) {
        super::NvidiaStrategy::CdiAnnotations
    } else {
        super::NvidiaStrategy::EnvVar
    }
}

#[cfg(test)]
mod auto_tests {
    use super::*;
    use crate::injection::NvidiaStrategy::{CdiAnnotations, EnvVar};

    #[test]
    fn auto_follows_containerds_cdi_setting() {
        let v2_on = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n";
        let v2_default = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"nvidia\"\n";
        let v3_default = "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n";
        let v3_off =
            "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false # off\n";
        let commented = "version = 2\n# enable_cdi = true\n";
        for (config, expected) in [
            (Some(v2_on), CdiAnnotations),
            (Some(v2_default), EnvVar),
            (Some(v3_default), CdiAnnotations),
            (Some(v3_off), EnvVar),
            (Some(commented), EnvVar),
            (Some(""), EnvVar),
            (None, EnvVar),
        ] {
            assert_eq!(auto_strategy(config), expected, "{config:?}");
        }
    }

    #[test]
    fn settings_and_unknown_values() {
        let never = || -> Option<String> { panic!("only auto reads containerd's config") };
        assert_eq!(strategy(None, never), Ok(EnvVar));
        assert_eq!(strategy(Some("envvar"), never), Ok(EnvVar));
        assert_eq!(strategy(Some("cdi-annotations"), never), Ok(CdiAnnotations));
        assert_eq!(
            strategy(Some("auto"), || Some("version = 3\n".into())),
            Ok(CdiAnnotations)
        );
        assert_eq!(strategy(Some("auto"), || None), Ok(EnvVar));
        assert_eq!(
            strategy(Some("cdi"), never),
            Err(UnknownStrategy("cdi".into()))
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use gpustack_api::devices::AllocationMode::{
        Exclusive, Partitioned, Shared, Sliced, Visibility,
    };

    use super::super::{fixtures::*, *};

    const LIB: &str = "/var/lib/gpustack/operator/lib/nvidia";
    const WORK: &str = "/var/lib/gpustack/operator/pods/uid-1/c-main";

    fn cards() -> DevicesGroup {
        group(
            Manufacturer::Nvidia,
            "12.4",
            "Hopper",
            vec![card("GPU-b", 1, &[1]), card("GPU-a", 0, &[0])],
        )
    }

    fn half() -> Option<SliceLimits> {
        Some(SliceLimits {
            cores_percentage: 50,
            memory_mib: 40000,
        })
    }

    #[test]
    fn whole_card_modes_name_the_uuids_in_index_order() {
        let g = cards();
        let own = BTreeSet::new();
        for mode in [Exclusive, Shared, Visibility] {
            let grants = vec![
                Grant::card(&g, &g.accelerators[0]),
                Grant::card(&g, &g.accelerators[1]),
            ];
            let got = inject(
                &request(Manufacturer::Nvidia, mode, grants, None, &own),
                &NodeFacts::default(),
            )
            .unwrap();
            assert_eq!(
                got,
                Injection {
                    envs: envs(&[("NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b")]),
                    ..Injection::default()
                },
                "{mode:?}"
            );
        }
    }

    #[test]
    fn cdi_strategy_uses_the_annotation() {
        let g = cards();
        let own = BTreeSet::new();
        let node = NodeFacts {
            nvidia_strategy: NvidiaStrategy::CdiAnnotations,
            ..NodeFacts::default()
        };
        let got = inject(
            &request(
                Manufacturer::Nvidia,
                Exclusive,
                vec![Grant::card(&g, &g.accelerators[1])],
                None,
                &own,
            ),
            &node,
        )
        .unwrap();
        assert!(got.envs.is_empty());
        assert_eq!(
            got.annotations,
            envs(&[("cdi.k8s.io/gpustack-nvidia", "nvidia.com/gpu=GPU-a")])
        );
    }

    #[test]
    fn sliced_gets_every_variable_and_mount() {
        let g = cards();
        let own = BTreeSet::new();
        let got = inject(
            &request(
                Manufacturer::Nvidia,
                Sliced,
                vec![Grant::card(&g, &g.accelerators[0])],
                half(),
                &own,
            ),
            &NodeFacts::default(),
        )
        .unwrap();
        assert_eq!(
            got.envs,
            envs(&[
                ("NVIDIA_VISIBLE_DEVICES", "GPU-b"),
                ("CUDA_DEVICE_SM_LIMIT", "50"),
                ("CUDA_DEVICE_MEMORY_LIMIT_0", "40000m"),
                (
                    "CUDA_DEVICE_MEMORY_SHARED_CACHE",
                    "/tmp/vgpu/cudevshr.cache"
                ),
                ("LIBCUDA_LOG_LEVEL", "0"),
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
            ])
        );
        assert_eq!(
            got.mounts,
            vec![
                mount(&format!("{LIB}/ld.so.preload"), "/etc/ld.so.preload", true),
                mount(
                    &format!("{LIB}/cuda-12/libvgpu.so"),
                    "/usr/local/vgpu/libvgpu.so",
                    true
                ),
                mount("/tmp/vgpulock", "/tmp/vgpulock", false),
                mount(&format!("{WORK}/tmp/vgpu"), "/tmp/vgpu", false),
                mount("/dev/shm", "/dev/shm", false),
            ]
        );
        assert_eq!(got.work_dirs, vec![format!("{WORK}/tmp/vgpu")]);
        assert!(got.devices.is_empty());
    }

    #[test]
    fn starred_defaults_yield_to_the_container() {
        let g = cards();
        let own: BTreeSet<String> = ["LIBCUDA_LOG_LEVEL".to_owned()].into();
        let got = inject(
            &request(
                Manufacturer::Nvidia,
                Sliced,
                vec![Grant::card(&g, &g.accelerators[0])],
                half(),
                &own,
            ),
            &NodeFacts::default(),
        )
        .unwrap();
        assert!(!got.envs.contains_key("LIBCUDA_LOG_LEVEL"));
        assert_eq!(got.envs["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
    }

    #[test]
    fn sliced_over_two_cards_numbers_limits_and_refuses_mixed_majors() {
        let g = cards();
        let other = group(
            Manufacturer::Nvidia,
            "13.0",
            "",
            vec![card("GPU-c", 2, &[2])],
        );
        let own = BTreeSet::new();
        let two = inject(
            &request(
                Manufacturer::Nvidia,
                Sliced,
                vec![
                    Grant::card(&g, &g.accelerators[0]),
                    Grant::card(&g, &g.accelerators[1]),
                ],
                half(),
                &own,
            ),
            &NodeFacts::default(),
        )
        .unwrap();
        assert_eq!(two.envs["CUDA_DEVICE_MEMORY_LIMIT_1"], "40000m");
        let mixed = inject(
            &request(
                Manufacturer::Nvidia,
                Sliced,
                vec![
                    Grant::card(&g, &g.accelerators[0]),
                    Grant::card(&other, &other.accelerators[0]),
                ],
                half(),
                &own,
            ),
            &NodeFacts::default(),
        );
        assert_eq!(
            mixed,
            Err(InjectionError::MixedRuntimeMajors("12,13".into()))
        );
    }

    #[test]
    fn partitioned_names_the_mig_uuid_even_under_cdi() {
        let g = cards();
        let own = BTreeSet::new();
        let node = NodeFacts {
            nvidia_strategy: NvidiaStrategy::CdiAnnotations,
            ..NodeFacts::default()
        };
        let mig = Grant {
            partition_id: Some("MIG-1234"),
            ..Grant::card(&g, &g.accelerators[0])
        };
        let got = inject(
            &request(Manufacturer::Nvidia, Partitioned, vec![mig], None, &own),
            &node,
        )
        .unwrap();
        assert_eq!(got.envs, envs(&[("NVIDIA_VISIBLE_DEVICES", "MIG-1234")]));
        assert!(got.annotations.is_empty());
        let missing = inject(
            &request(
                Manufacturer::Nvidia,
                Partitioned,
                vec![Grant::card(&g, &g.accelerators[0])],
                None,
                &own,
            ),
            &node,
        );
        assert_eq!(
            missing,
            Err(InjectionError::MissingPartitionId("GPU-b".into()))
        );
    }

    #[test]
    fn iluvatar_uses_indexes_and_the_cuda_12_shim() {
        let g = group(Manufacturer::Iluvatar, "", "", vec![card("ix-0", 3, &[3])]);
        let own = BTreeSet::new();
        let got = inject(
            &request(
                Manufacturer::Iluvatar,
                Sliced,
                vec![Grant::card(&g, &g.accelerators[0])],
                half(),
                &own,
            ),
            &NodeFacts::default(),
        )
        .unwrap();
        assert_eq!(got.envs["IX_VISIBLE_DEVICES"], "3");
        assert_eq!(got.envs["CUDA_DEVICE_SM_LIMIT"], "50");
        assert!(got.mounts.contains(&mount(
            "/var/lib/gpustack/operator/lib/iluvatar/cuda-12/libvgpu.so",
            "/usr/local/vgpu/libvgpu.so",
            true
        )));
    }
}
