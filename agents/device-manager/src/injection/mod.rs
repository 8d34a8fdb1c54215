//! What a container gets when `Allocate` grants it accelerators: environment, bind mounts, device
//! nodes, annotations and the small files rendered for it (devices.md §5.1).
//!
//! Pure: [`inject`] reads nothing and writes nothing. The device plugin turns an [`Injection`]
//! into a kubelet `ContainerAllocateResponse` (after writing [`Injection::files`] and creating
//! [`Injection::work_dirs`]); preflight starts its probe containers from the same value.
//!
//! Per manufacturer, one file: [`nvidia`] (and Iluvatar's HAMi-core slicing, which is the same
//! shim), [`amd`] (and Hygon's nodes, the same DRM layout), [`ascend`], [`thead`], [`others`]
//! (Cambricon, MetaX, MThreads).

pub(crate) mod amd;
pub(crate) mod ascend;
pub mod nvidia;
pub(crate) mod others;
pub(crate) mod thead;

use std::collections::{BTreeMap, BTreeSet};

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AllocationMode, DevicesGroup, Placement},
};

/// Where the node keeps what the init container staged (`/etc/gpustack/lib/<mfr>/…` copied here).
pub const DEFAULT_LIB_DIR: &str = "/var/lib/gpustack/operator/lib";
/// Where the node keeps per-container work directories (`<pods>/<podUID>/c-<container>`).
pub const DEFAULT_PODS_DIR: &str = "/var/lib/gpustack/operator/pods";

/// One container's work directory on the node: `<pods_dir>/<pod_uid>/c-<container>`.
pub fn pod_work_dir(pods_dir: &str, pod_uid: &str, container: &str) -> String {
    format!("{}/{pod_uid}/c-{container}", pods_dir.trim_end_matches('/'))
}

/// How NVIDIA devices are named to the container runtime (`GPUSTACK_NVIDIA_DEVICE_INJECTION_STRATEGY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NvidiaStrategy {
    /// `NVIDIA_VISIBLE_DEVICES=<uuid,…>`, read by the NVIDIA container runtime.
    #[default]
    EnvVar,
    /// `cdi.k8s.io/gpustack-nvidia: nvidia.com/gpu=<uuid>,…`, read by a CDI-enabled runtime.
    CdiAnnotations,
}

/// Facts about the node that every injection on it shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFacts {
    /// Host directory holding the staged shims ([`DEFAULT_LIB_DIR`]).
    pub lib_dir: String,
    /// How NVIDIA devices are named to the runtime on this node.
    pub nvidia_strategy: NvidiaStrategy,
}

impl Default for NodeFacts {
    fn default() -> Self {
        Self {
            lib_dir: DEFAULT_LIB_DIR.to_owned(),
            nvidia_strategy: NvidiaStrategy::EnvVar,
        }
    }
}

/// One accelerator granted to the container.
#[derive(Clone, Copy, Debug)]
pub struct Grant<'a> {
    /// The accelerator's group (product, driver and runtime versions).
    pub group: &'a DevicesGroup,
    /// The granted accelerator.
    pub accelerator: &'a Accelerator,
    /// Partitioned mode: the partition's own id (NVIDIA MIG UUID).
    pub partition_id: Option<&'a str>,
    /// Sliced AMD: the compute-unit window the allocator placed the slice on.
    pub cu_placements: &'a [Placement],
}

impl<'a> Grant<'a> {
    /// A whole-card grant (exclusive, shared, visibility, or a slice without placements).
    pub fn card(group: &'a DevicesGroup, accelerator: &'a Accelerator) -> Self {
        Self {
            group,
            accelerator,
            partition_id: None,
            cu_placements: &[],
        }
    }
}

/// A logical slice's limits, per accelerator, as the container's limits asked for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceLimits {
    /// `.sliced.cores-percentage` (1–100).
    pub cores_percentage: u32,
    /// Memory cap in MiB (already resolved from a percentage).
    pub memory_mib: u64,
}

/// Everything [`inject`] needs for one container.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The granted accelerators' manufacturer; picks the vendor's injection.
    pub manufacturer: Manufacturer,
    /// The mode the container was allocated in.
    pub mode: AllocationMode,
    /// The accelerators granted to the container, at least one.
    pub grants: Vec<Grant<'a>>,
    /// Required for [`AllocationMode::Sliced`], ignored otherwise.
    pub slice: Option<SliceLimits>,
    /// The container's work directory on the node ([`pod_work_dir`]).
    pub pod_work_dir: &'a str,
    /// Environment variable names the container sets itself: a default marked `*` in the
    /// reference table is injected only when the container does not set it.
    pub own_env: &'a BTreeSet<String>,
}

/// A host path bind-mounted into the container.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mount {
    /// Absolute path on the host.
    pub host_path: String,
    /// Absolute path in the container.
    pub container_path: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A host device node made available in the container; `permissions` as the kubelet takes them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeviceNode {
    /// The device node on the host (`/dev/nvidia0`).
    pub host_path: String,
    /// Where it appears in the container.
    pub container_path: String,
    /// cgroup access: a combination of `r`, `w` and `m` (mknod).
    pub permissions: String,
}

/// A file the plugin writes on the host before answering (it is also one of the mounts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedFile {
    /// Absolute path on the host, under the container's work directory.
    pub host_path: String,
    /// The file's full contents.
    pub contents: String,
}

/// What one container receives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Injection {
    /// Environment variables set in the container.
    pub envs: BTreeMap<String, String>,
    /// Bind mounts, sorted.
    pub mounts: Vec<Mount>,
    /// Device nodes, sorted.
    pub devices: Vec<DeviceNode>,
    /// Annotations on the container (CDI device names).
    pub annotations: BTreeMap<String, String>,
    /// Files written on the host before the container starts.
    pub files: Vec<RenderedFile>,
    /// Host directories that must exist before the container starts (rw work mounts).
    pub work_dirs: Vec<String>,
}

/// Why no injection can be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InjectionError {
    /// The request grants no accelerator.
    #[error("no accelerator granted")]
    NoAccelerator,
    /// The manufacturer has no injection for the requested mode.
    #[error("{manufacturer} has no {mode} injection")]
    Unsupported {
        /// The granted accelerators' manufacturer.
        manufacturer: Manufacturer,
        /// The mode asked for, as its lowercase name.
        mode: &'static str,
    },
    /// A sliced grant came without its [`SliceLimits`].
    #[error("a sliced grant needs its limits (cores percentage and memory)")]
    MissingSliceLimits,
    /// The slice's cores percentage is outside 1–100.
    #[error("slice cores percentage {0} is not within 1-100")]
    InvalidCoresPercentage(u32),
    /// The manufacturer's slicing works on one accelerator per container.
    #[error("{manufacturer} slices one accelerator per container, {count} granted")]
    SingleAcceleratorOnly {
        /// The manufacturer that slices one card per container.
        manufacturer: Manufacturer,
        /// How many accelerators were granted.
        count: usize,
    },
    /// The granted accelerators' runtime majors differ (listed), so no one shim fits them all.
    #[error("accelerators with different runtime majors ({0}) cannot share one slicing shim")]
    MixedRuntimeMajors(String),
    /// The accelerator (by id) reports no runtime version to pick the slicing shim by.
    #[error("accelerator {0} has no runtime version to pick its slicing shim")]
    UnknownRuntimeMajor(String),
    /// A partitioned grant on the accelerator (by id) names no partition.
    #[error("partitioned grant on accelerator {0} names no partition")]
    MissingPartitionId(String),
    /// The accelerator `id` lacks the physical index that `what` is addressed by.
    #[error("accelerator {id} has no physical index for {what}")]
    MissingPhysicalIndex {
        /// The accelerator's id.
        id: String,
        /// What needed the index (a device node, a visibility variable).
        what: &'static str,
    },
}

/// Builds what the container gets for `request`'s grants on this node.
pub fn inject(request: &Request<'_>, node: &NodeFacts) -> Result<Injection, InjectionError> {
    if request.grants.is_empty() {
        return Err(InjectionError::NoAccelerator);
    }
    let mut grants = request.grants.clone();
    // Positional variables (`…_LIMIT_<i>`) follow ascending accelerator index.
    grants.sort_by_key(|g| g.accelerator.index);
    let slice = match request.mode {
        AllocationMode::Sliced => {
            let s = request.slice.ok_or(InjectionError::MissingSliceLimits)?;
            if !(1..=100).contains(&s.cores_percentage) {
                return Err(InjectionError::InvalidCoresPercentage(s.cores_percentage));
            }
            Some(s)
        }
        _ => None,
    };
    let ctx = Context {
        grants: &grants,
        mode: request.mode,
        slice,
        pod_work_dir: request.pod_work_dir.trim_end_matches('/'),
        own_env: request.own_env,
        node,
    };
    let mut out = Injection::default();
    match request.manufacturer {
        Manufacturer::Nvidia => nvidia::inject(&ctx, &mut out)?,
        Manufacturer::Iluvatar => nvidia::inject_iluvatar(&ctx, &mut out)?,
        Manufacturer::Amd => amd::inject(&ctx, &mut out)?,
        Manufacturer::Hygon => amd::inject_hygon(&ctx, &mut out)?,
        Manufacturer::Ascend => ascend::inject(&ctx, &mut out)?,
        Manufacturer::Cambricon => others::inject_cambricon(&ctx, &mut out)?,
        Manufacturer::Metax => others::inject_metax(&ctx, &mut out)?,
        Manufacturer::Mthreads => others::inject_mthreads(&ctx, &mut out)?,
        Manufacturer::Thead => thead::inject(&ctx, &mut out)?,
    }
    out.mounts.dedup();
    out.devices.dedup();
    Ok(out)
}

/// The request, normalised, as the per-vendor files see it.
pub(crate) struct Context<'a> {
    /// Sorted by accelerator index.
    pub grants: &'a [Grant<'a>],
    pub mode: AllocationMode,
    /// Present exactly when the mode is sliced.
    pub slice: Option<SliceLimits>,
    pub pod_work_dir: &'a str,
    pub own_env: &'a BTreeSet<String>,
    pub node: &'a NodeFacts,
}

impl Context<'_> {
    pub fn manufacturer_lib(&self, manufacturer: Manufacturer) -> String {
        format!(
            "{}/{}",
            self.node.lib_dir.trim_end_matches('/'),
            manufacturer.as_str()
        )
    }

    pub fn unsupported(&self, manufacturer: Manufacturer) -> InjectionError {
        InjectionError::Unsupported {
            manufacturer,
            mode: self.mode.as_str(),
        }
    }

    /// Accelerator ids, comma-joined, in index order; a grant on a partition (a sidecar seeing
    /// a partitioned owner's grant) names the partition, never its parent card.
    pub fn ids(&self) -> String {
        join(self.grants.iter().map(|g| {
            g.partition_id
                .filter(|p| !p.is_empty())
                .unwrap_or(g.accelerator.id.as_str())
        }))
    }

    /// Accelerator indexes, comma-joined.
    pub fn indexes(&self) -> String {
        join(self.grants.iter().map(|g| g.accelerator.index.to_string()))
    }

    /// Each grant's first physical index (the card's device-node number), in grant order; a
    /// card without one is refused, never answered with a neighbour's node.
    pub fn first_physical(&self, what: &'static str) -> Result<Vec<u32>, InjectionError> {
        self.grants
            .iter()
            .map(|g| {
                g.accelerator
                    .physical_indexes
                    .first()
                    .copied()
                    .ok_or_else(|| InjectionError::MissingPhysicalIndex {
                        id: g.accelerator.id.clone(),
                        what,
                    })
            })
            .collect()
    }

    pub fn single(&self, manufacturer: Manufacturer) -> Result<&Grant<'_>, InjectionError> {
        match self.grants {
            [one] => Ok(one),
            _ => Err(InjectionError::SingleAcceleratorOnly {
                manufacturer,
                count: self.grants.len(),
            }),
        }
    }
}

impl Injection {
    pub(crate) fn env(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.envs.insert(key.into(), value.into());
    }

    /// A `*` default: set only where the container does not set it itself.
    pub(crate) fn env_default(&mut self, own: &BTreeSet<String>, key: &str, value: &str) {
        if !own.contains(key) {
            self.env(key, value);
        }
    }

    pub(crate) fn mount_ro(&mut self, host: impl Into<String>, container: impl Into<String>) {
        self.mounts.push(Mount {
            host_path: host.into(),
            container_path: container.into(),
            read_only: true,
        });
    }

    pub(crate) fn mount_rw(&mut self, host: impl Into<String>, container: impl Into<String>) {
        self.mounts.push(Mount {
            host_path: host.into(),
            container_path: container.into(),
            read_only: false,
        });
    }

    /// A device node at the same path on the host and in the container.
    pub(crate) fn device(&mut self, path: impl Into<String>) {
        let path = path.into();
        self.devices.push(DeviceNode {
            host_path: path.clone(),
            container_path: path,
            permissions: "rw".to_owned(),
        });
    }
}

/// The major of a `major.minor…` version string.
pub(crate) fn major(version: &str) -> Option<&str> {
    let major = version.split(['.', '-']).next()?.trim();
    (!major.is_empty() && major.bytes().all(|b| b.is_ascii_digit())).then_some(major)
}

/// The one runtime major every grant shares (its slicing shim is built per major).
pub(crate) fn shared_major<'a>(grants: &[Grant<'a>]) -> Result<&'a str, InjectionError> {
    let mut majors = BTreeSet::new();
    for g in grants {
        let m = major(&g.group.runtime_version)
            .ok_or_else(|| InjectionError::UnknownRuntimeMajor(g.accelerator.id.clone()))?;
        majors.insert(m);
    }
    match majors.len() {
        1 => Ok(majors.into_iter().next().unwrap_or_default()),
        _ => Err(InjectionError::MixedRuntimeMajors(join(majors))),
    }
}

pub(crate) fn join<I, S>(items: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    items
        .into_iter()
        .map(|s| s.as_ref().to_owned())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Small groups and cards the per-vendor table tests share.
    use super::*;

    pub fn card(id: &str, index: u32, physical: &[u32]) -> Accelerator {
        Accelerator {
            id: id.to_owned(),
            index,
            physical_indexes: physical.to_vec(),
            ..Accelerator::default()
        }
    }

    pub fn group(
        m: Manufacturer,
        runtime: &str,
        family: &str,
        cards: Vec<Accelerator>,
    ) -> DevicesGroup {
        DevicesGroup {
            runtime_version: runtime.to_owned(),
            family: family.to_owned(),
            cores: Some(60),
            accelerators: cards,
            ..DevicesGroup::new(m, "g", "G", 16384)
        }
    }

    pub fn request<'a>(
        m: Manufacturer,
        mode: AllocationMode,
        grants: Vec<Grant<'a>>,
        slice: Option<SliceLimits>,
        own_env: &'a BTreeSet<String>,
    ) -> Request<'a> {
        Request {
            manufacturer: m,
            mode,
            grants,
            slice,
            pod_work_dir: "/var/lib/gpustack/operator/pods/uid-1/c-main",
            own_env,
        }
    }

    pub fn mount(host: &str, container: &str, read_only: bool) -> Mount {
        Mount {
            host_path: host.to_owned(),
            container_path: container.to_owned(),
            read_only,
        }
    }

    pub fn envs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{fixtures::*, *};

    #[test]
    fn work_dir_and_majors() {
        assert_eq!(
            pod_work_dir("/var/lib/gpustack/operator/pods/", "u1", "main"),
            "/var/lib/gpustack/operator/pods/u1/c-main"
        );
        for (v, want) in [
            ("12.4", Some("12")),
            ("13", Some("13")),
            ("8.0.RC1", Some("8")),
            ("", None),
            ("x.1", None),
        ] {
            assert_eq!(major(v), want, "{v}");
        }
    }

    #[test]
    fn common_refusals() {
        let own = BTreeSet::new();
        let g = group(
            Manufacturer::Nvidia,
            "12.4",
            "",
            vec![card("GPU-a", 0, &[0])],
        );
        let node = NodeFacts::default();
        let cases: Vec<(Request<'_>, InjectionError)> = vec![
            (
                request(
                    Manufacturer::Nvidia,
                    AllocationMode::Exclusive,
                    vec![],
                    None,
                    &own,
                ),
                InjectionError::NoAccelerator,
            ),
            (
                request(
                    Manufacturer::Nvidia,
                    AllocationMode::Sliced,
                    vec![Grant::card(&g, &g.accelerators[0])],
                    None,
                    &own,
                ),
                InjectionError::MissingSliceLimits,
            ),
            (
                request(
                    Manufacturer::Nvidia,
                    AllocationMode::Sliced,
                    vec![Grant::card(&g, &g.accelerators[0])],
                    Some(SliceLimits {
                        cores_percentage: 0,
                        memory_mib: 1,
                    }),
                    &own,
                ),
                InjectionError::InvalidCoresPercentage(0),
            ),
        ];
        for (req, want) in cases {
            assert_eq!(inject(&req, &node), Err(want));
        }
    }
}
