//! Hardware partitions as the partitioned device plugin makes and reclaims them, through the
//! manufacturer's library under the system root. NVIDIA (MIG through NVML) is the one
//! manufacturer here that can carve partitions; the others answer [`PartitionError::Unsupported`].

use std::ffi::OsStr;

use gpustack_api::Manufacturer;

use super::nvidia::mig_instances::{self, InstanceError};
use crate::{
    library::{self, Located},
    system_root::SystemRoot,
};

/// One partition to make: `profile` at slot (`start`, `size`) of card `accelerator`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub manufacturer: Manufacturer,
    pub accelerator: &'a str,
    pub profile: &'a str,
    pub start: u32,
    pub size: u32,
}

/// A partition the library made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// What the container is given (`MIG-…`).
    pub id: String,
    pub gpu_instance: u32,
    pub compute_instance: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("{0} partitions cannot be made by this agent")]
    Unsupported(Manufacturer),
    #[error("no {0} management library under the system root")]
    NoLibrary(Manufacturer),
    #[error("loading {library}: {message}")]
    Load { library: String, message: String },
    #[error("the library lists no card {0}")]
    NoCard(String),
    #[error(transparent)]
    Nvml(#[from] InstanceError),
    #[error("the partition task failed: {0}")]
    Task(String),
}

impl PartitionError {
    /// The partition still runs work: try again later.
    pub fn is_in_use(&self) -> bool {
        matches!(self, Self::Nvml(e) if e.is_in_use())
    }
}

/// NVML loaded from under `root`, and the card `accelerator` in it.
fn with_nvidia_card<T>(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    accelerator: &str,
    f: impl FnOnce(&nvml_wrapper::Nvml, &nvml_wrapper::Device<'_>) -> Result<T, PartitionError>,
) -> Result<T, PartitionError> {
    let (nvml, path) = load_nvml(root, env)?;
    let count = nvml.device_count().map_err(|e| PartitionError::Load {
        library: path,
        message: e.to_string(),
    })?;
    for index in 0..count {
        let Ok(device) = nvml.device_by_index(index) else {
            continue;
        };
        if device.uuid().is_ok_and(|u| u == accelerator) {
            return f(&nvml, &device);
        }
    }
    Err(PartitionError::NoCard(accelerator.to_owned()))
}

/// NVML loaded and initialised from under `root`, and the path it was loaded from.
pub fn load_nvml(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(nvml_wrapper::Nvml, String), PartitionError> {
    let spec = Manufacturer::Nvidia.spec();
    let path = match library::locate(root, spec, env) {
        Some(Located::Path(p)) => p.into_os_string(),
        Some(Located::LoaderSearch(name)) => name.into(),
        None => return Err(PartitionError::NoLibrary(Manufacturer::Nvidia)),
    };
    let nvml = nvml_wrapper::Nvml::builder()
        .lib_path(OsStr::new(&path))
        .init()
        .map_err(|e| PartitionError::Load {
            library: path.to_string_lossy().into_owned(),
            message: e.to_string(),
        })?;
    Ok((nvml, path.to_string_lossy().into_owned()))
}

/// Makes the partition of `request`.
pub fn create(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    request: &Request<'_>,
) -> Result<Made, PartitionError> {
    match request.manufacturer {
        Manufacturer::Nvidia => with_nvidia_card(root, env, request.accelerator, |nvml, dev| {
            let c = mig_instances::create(nvml, dev, request.profile, request.start, request.size)?;
            Ok(Made {
                id: c.uuid,
                gpu_instance: c.gpu_instance,
                compute_instance: c.compute_instance,
            })
        }),
        other => Err(PartitionError::Unsupported(other)),
    }
}

/// Destroys partition (`gpu_instance`, `compute_instance`) of card `accelerator`; one already
/// gone is done.
pub fn destroy(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    manufacturer: Manufacturer,
    accelerator: &str,
    gpu_instance: u32,
    compute_instance: u32,
) -> Result<(), PartitionError> {
    match manufacturer {
        Manufacturer::Nvidia => with_nvidia_card(root, env, accelerator, |nvml, dev| {
            Ok(mig_instances::destroy(
                nvml,
                dev,
                gpu_instance,
                compute_instance,
            )?)
        }),
        other => Err(PartitionError::Unsupported(other)),
    }
}

/// [`destroy`] on a blocking thread (the library's calls block), for the async callers: an
/// `Allocate` undoing a partition it made, and the reclaim loop.
pub async fn destroy_blocking(
    root: SystemRoot,
    env: crate::host_env::Env,
    manufacturer: Manufacturer,
    accelerator: String,
    (gpu_instance, compute_instance): (u32, u32),
) -> Result<(), PartitionError> {
    tokio::task::spawn_blocking(move || {
        let lookup = |k: &str| env(k);
        destroy(
            &root,
            &lookup,
            manufacturer,
            &accelerator,
            gpu_instance,
            compute_instance,
        )
    })
    .await
    .map_err(|e| PartitionError::Task(e.to_string()))?
}
