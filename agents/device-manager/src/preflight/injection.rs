//! The seam between preflight and the allocator's injection: probe containers are started from
//! exactly what `Allocate` hands the kubelet for a container ([`crate::injection::inject`], the
//! same pure function the device plugin calls), so that what preflight measures is what an
//! allocated container gets. Preflight never decides on its own what a container receives.

use std::{collections::BTreeSet, fs};

use gpustack_api::devices::{Accelerator, AllocationMode, DevicesGroup};

pub use crate::injection::nvidia::UnknownStrategy;
pub use crate::injection::{
    DeviceNode as InjectedDevice, Injection as ContainerInjection, InjectionError,
    Mount as InjectedMount,
};
use crate::{
    injection::{self, Grant, NodeFacts, Request, SliceLimits, nvidia},
    system_root::SystemRoot,
};

/// One logical slice of one accelerator, as a container's limits would ask for it.
#[derive(Clone, Copy, Debug)]
pub struct SliceRequest<'a> {
    /// The accelerator's group (product, driver and runtime versions).
    pub group: &'a DevicesGroup,
    /// The accelerator the slice is on.
    pub accelerator: &'a Accelerator,
    /// `.sliced.cores-percentage`.
    pub cores_percentage: u32,
    /// The slice's memory in MiB (already resolved from a percentage).
    pub memory_mib: u64,
    /// The container's work directory on the node (the allocator's `podWorkDir`).
    pub pod_work_dir: &'a str,
}

/// What `Allocate` injects, per mode, for one accelerator.
pub trait AllocatorInjection {
    /// A container holding `request`'s slice (mode `sliced`).
    fn sliced(&self, request: &SliceRequest<'_>) -> Result<ContainerInjection, InjectionError>;

    /// A sidecar holding a visibility token on `accelerator` (mode `visibility`).
    fn visibility(
        &self,
        group: &DevicesGroup,
        accelerator: &Accelerator,
    ) -> Result<ContainerInjection, InjectionError>;
}

/// The allocator's injection on this node: [`injection::inject`] with the node's facts. The probe
/// sets no variables of its own, so every `*` default is injected.
#[derive(Clone, Debug, Default)]
pub struct NodeInjection {
    /// The node's staged library directory and NVIDIA naming strategy.
    pub facts: NodeFacts,
}

impl NodeInjection {
    /// The node's facts as `dm serve` reads them: `GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY`,
    /// where `auto` reads containerd's `config.toml` on the host (under
    /// `GPUSTACK_CONTAINERD_CONFIG_DIR`, else `/etc/containerd`).
    pub fn from_env(
        env: &dyn Fn(&str) -> Option<String>,
        host: &SystemRoot,
    ) -> Result<Self, UnknownStrategy> {
        let setting = env("GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY");
        let nvidia_strategy = nvidia::strategy(setting.as_deref(), || {
            let dir = env("GPUSTACK_CONTAINERD_CONFIG_DIR")
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| nvidia::DEFAULT_CONTAINERD_CONFIG_DIR.into());
            fs::read_to_string(host.path(format!("{dir}/config.toml"))).ok()
        })?;
        Ok(Self {
            facts: NodeFacts {
                nvidia_strategy,
                ..NodeFacts::default()
            },
        })
    }

    fn inject(
        &self,
        group: &DevicesGroup,
        accelerator: &Accelerator,
        mode: AllocationMode,
        slice: Option<SliceLimits>,
        pod_work_dir: &str,
    ) -> Result<ContainerInjection, InjectionError> {
        let own_env = BTreeSet::new();
        injection::inject(
            &Request {
                manufacturer: group.manufacturer,
                mode,
                grants: vec![Grant::card(group, accelerator)],
                slice,
                pod_work_dir,
                own_env: &own_env,
            },
            &self.facts,
        )
    }
}

impl AllocatorInjection for NodeInjection {
    fn sliced(&self, r: &SliceRequest<'_>) -> Result<ContainerInjection, InjectionError> {
        self.inject(
            r.group,
            r.accelerator,
            AllocationMode::Sliced,
            Some(SliceLimits {
                cores_percentage: r.cores_percentage,
                memory_mib: r.memory_mib,
            }),
            r.pod_work_dir,
        )
    }

    fn visibility(
        &self,
        group: &DevicesGroup,
        accelerator: &Accelerator,
    ) -> Result<ContainerInjection, InjectionError> {
        self.inject(group, accelerator, AllocationMode::Visibility, None, "")
    }
}
