//! The JSON fixture the stand-in serves: one system and its devices, in NVML's own units where
//! NVML has one (mW, °C, percent, MB for profile memory) and MiB for card memory, so that
//! fixtures read like `nvidia-smi` (or `ixsmi`, or `ppu-smi`: the same shape serves every
//! NVML-shaped library, each from the file its own variable names).
//!
//! A device field that is absent makes the matching call answer `*_ERROR_NOT_SUPPORTED`, as the
//! real driver does for a query the product lacks (no ECC on a GeForce card, no utilization on a
//! card in MIG mode).

pub use gpustack_fake_abi::LoadError;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// `nvmlSystemGetDriverVersion`, e.g. `550.54.15`.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// The compute runtime's driver version: `nvmlSystemGetCudaDriverVersion_v2` (and IXML's
    /// unversioned `nvmlSystemGetCudaDriverVersion`), e.g. `12040` for CUDA 12.4;
    /// `hgmlSystemGetHggcDriverVersion_v2` (`hggcDriverVersion`), e.g. `13000` for HGGC 13.0.
    #[serde(default, rename = "cudaDriverVersion", alias = "hggcDriverVersion")]
    pub runtime_driver_version: Option<i32>,
    /// The init call answers this status instead of initialising (a driver that is installed
    /// but not loaded answers 9, `*_ERROR_DRIVER_NOT_LOADED`).
    #[serde(default)]
    pub init_status: Option<u32>,
    /// In NVML enumeration order.
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    /// With NVML's `GPU-` prefix.
    pub uuid: String,
    pub name: String,
    /// NVML's form: `00000000:18:00.0`.
    pub pci_bus_id: String,
    /// `(device << 16) | vendor`, e.g. `0x233010de`.
    #[serde(default)]
    pub pci_device_id: u32,
    #[serde(default)]
    pub pci_sub_system_id: u32,
    pub memory_total_mib: u64,
    #[serde(default)]
    pub memory_used_mib: Option<u64>,
    #[serde(default)]
    pub memory_reserved_mib: u64,
    #[serde(default)]
    pub cores: Option<u32>,
    #[serde(default)]
    pub minor: Option<u32>,
    /// `nvmlDeviceGetCudaComputeCapability` (`cudaComputeCapability`),
    /// `hgmlDeviceGetHggcComputeCapability` (`computeCapability`).
    #[serde(default, rename = "cudaComputeCapability", alias = "computeCapability")]
    pub compute_capability: Option<ComputeCapability>,
    #[serde(default)]
    pub ecc_enabled: Option<bool>,
    /// Uncorrected ECC errors since the driver loaded (`nvmlDeviceGetTotalEccErrors`,
    /// `NVML_VOLATILE_ECC`), summed over every memory location as that call does; HGML's
    /// `hgmlDeviceGetMemoryErrorCounter` answers it for DRAM.
    #[serde(default)]
    pub ecc_uncorrected_volatile: Option<u64>,
    #[serde(default)]
    pub ecc_corrected_volatile: Option<u64>,
    /// The card's lifetime counts (`NVML_AGGREGATE_ECC`), at least the volatile ones on a real
    /// card; absent answers `NVML_ERROR_NOT_SUPPORTED` for that counter only.
    #[serde(default)]
    pub ecc_uncorrected_aggregate: Option<u64>,
    #[serde(default)]
    pub ecc_corrected_aggregate: Option<u64>,
    /// Bits; 5120 for HBM3 on H100, 384 for GDDR6 on L40S.
    #[serde(default)]
    pub memory_bus_width: Option<u32>,
    #[serde(default)]
    pub mig_mode: Option<MigMode>,
    /// GPU-instance profiles by enumeration index (`NVML_GPU_INSTANCE_PROFILE_*`), served by
    /// `nvmlDeviceGetGpuInstanceProfileInfo(V)` and `nvmlDeviceGetGpuInstancePossiblePlacements_v2`
    /// only while `migMode.current` is 1; an index not listed answers
    /// `NVML_ERROR_NOT_SUPPORTED`, as for a profile the product lacks.
    #[serde(default)]
    pub mig_profiles: Vec<MigProfile>,
    /// Memory used on each MIG device of the card (MiB), for `nvmlDeviceGetMemoryInfo(_v2)` on
    /// a MIG device handle; absent answers `NVML_ERROR_NOT_SUPPORTED` there.
    #[serde(default)]
    pub mig_memory_used_mib: Option<u64>,
    #[serde(default)]
    pub utilization: Option<Utilization>,
    /// GPU sensor, °C.
    #[serde(default)]
    pub temperature: Option<u32>,
    #[serde(default)]
    pub power_usage_mw: Option<u32>,
    /// The compute processes on the card (`nvmlDeviceGetComputeRunningProcesses_v3`); absent
    /// answers `NVML_ERROR_NOT_SUPPORTED`.
    #[serde(default)]
    pub processes: Option<Vec<Process>>,
    /// IXML's `ixmlDeviceGetHealth` bitmask (`ixmlHealth*` flags, 0 = OK); absent on NVIDIA
    /// fixtures, where the call does not exist.
    #[serde(default)]
    pub health: Option<u64>,
}

/// One process with a compute context on a card, as `nvidia-smi` lists it: host PID and the
/// card memory it holds (absent: NVML's "not available", as under some drivers).
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    #[serde(default)]
    pub used_memory_mib: Option<u64>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct ComputeCapability {
    pub major: i32,
    pub minor: i32,
}

/// `NVML_DEVICE_MIG_DISABLE` 0 / `NVML_DEVICE_MIG_ENABLE` 1.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct MigMode {
    pub current: u32,
    pub pending: u32,
}

/// One GPU-instance profile, as `nvidia-smi mig -lgip` and `-lgipp` list it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigProfile {
    /// The enumeration index the profile-info calls are asked for.
    pub index: u32,
    /// The creation id the record carries and placements are asked by (not the index).
    pub id: u32,
    /// As NVML names it, `MIG 1g.10gb`.
    pub name: String,
    /// GPU (compute) slices.
    pub slice_count: u32,
    pub instance_count: u32,
    /// MiB, which NVML calls MB.
    pub memory_size_mb: u64,
    pub placements: Vec<Slot>,
}

/// `nvmlGpuInstancePlacement_t`: first memory slice and length.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    pub start: u32,
    pub size: u32,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    pub gpu: u32,
    pub memory: u32,
}

/// The fixture named by the variable `env`.
pub fn load(env: &str) -> Result<Fixture, LoadError> {
    gpustack_fake_abi::load(env)
}
