//! One stand-in library: the fixture it serves (named by its own environment variable) with the
//! NVML-shaped reference-counted init and shutdown, and the bodies of the calls every
//! NVML-shaped library has. The exports ([`crate::nvml`], [`crate::hgml`]) are thin wrappers
//! naming these under each library's symbol prefix.

use std::{
    ffi::{c_char, c_int, c_uint},
    sync::{Mutex, MutexGuard},
};

use crate::{
    abi::{self, DeviceHandle, Return, put, put_str, supported},
    fixture::{self, Device, Fixture, LoadError},
    instances,
};

/// The loaded fixture and the count of inits not yet shut down.
struct State {
    fixture: Option<Fixture>,
    inits: u32,
}

/// Where the libraries the stand-in plays answer differently.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// NVML (and IXML): MIG device handles are served ([`instances`]), and a card whose
    /// fixture gives no memory use answers `*_ERROR_NOT_SUPPORTED` for its memory.
    Nvml,
    /// HGML: no MIG device handles, and a card whose fixture gives no memory use uses none.
    Hgml,
}

/// One NVML-shaped library the stand-in plays.
pub struct Library {
    /// The variable naming its fixture file.
    fixture_env: &'static str,
    flavour: Flavour,
    state: Mutex<State>,
}

impl Library {
    pub const fn new(fixture_env: &'static str, flavour: Flavour) -> Self {
        Library {
            fixture_env,
            flavour,
            state: Mutex::new(State {
                fixture: None,
                inits: 0,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        gpustack_fake_abi::lock(&self.state)
    }

    /// Every init entry point: loads the fixture once; an unset variable or unreadable file
    /// answers `*_ERROR_DRIVER_NOT_LOADED` (the driver is not there), bad JSON
    /// `*_ERROR_UNKNOWN`, and a fixture's `initStatus` is answered as given.
    pub fn init(&self) -> Return {
        let mut st = self.state();
        if st.fixture.is_none() {
            match fixture::load(self.fixture_env) {
                Ok(f) => {
                    if let Some(status) = f.init_status {
                        return status;
                    }
                    st.fixture = Some(f);
                }
                Err(LoadError::Missing) => return abi::ERROR_DRIVER_NOT_LOADED,
                Err(LoadError::Invalid) => return abi::ERROR_UNKNOWN,
            }
        }
        st.inits += 1;
        abi::SUCCESS
    }

    pub fn shutdown(&self) -> Return {
        let mut st = self.state();
        if st.inits == 0 {
            return abi::ERROR_UNINITIALIZED;
        }
        st.inits -= 1;
        if st.inits == 0 {
            st.fixture = None;
        }
        abi::SUCCESS
    }

    pub fn with_fixture(&self, f: impl FnOnce(&Fixture) -> Return) -> Return {
        match &self.state().fixture {
            Some(fixture) => f(fixture),
            None => abi::ERROR_UNINITIALIZED,
        }
    }

    /// `f` of the device a handle names: the device's index plus one, never dereferenced.
    pub fn with_device(&self, handle: DeviceHandle, f: impl FnOnce(&Device) -> Return) -> Return {
        self.with_fixture(|fixture| {
            let index = handle.addr().wrapping_sub(1);
            match fixture.devices.get(index) {
                Some(device) => f(device),
                None => abi::ERROR_INVALID_ARGUMENT,
            }
        })
    }

    fn is_mig_device(&self, handle: DeviceHandle) -> bool {
        self.flavour == Flavour::Nvml && instances::is_mig_handle(handle)
    }

    pub fn driver_version(&self, version: *mut c_char, length: c_uint) -> Return {
        self.with_fixture(|f| {
            supported(f.driver_version.as_deref(), |v| put_str(version, length, v))
        })
    }

    /// The compute runtime's driver version (CUDA's, HGGC's): `1000 * major + 10 * minor`.
    pub fn runtime_version(&self, version: *mut c_int) -> Return {
        self.with_fixture(|f| supported(f.runtime_driver_version, |v| put(version, v)))
    }

    pub fn device_count(&self, count: *mut c_uint) -> Return {
        self.with_fixture(|f| put(count, f.devices.len() as c_uint))
    }

    pub fn handle_by_index(&self, index: c_uint, device: *mut DeviceHandle) -> Return {
        self.with_fixture(|f| {
            if index as usize >= f.devices.len() {
                return abi::ERROR_INVALID_ARGUMENT;
            }
            put(device, std::ptr::without_provenance_mut(index as usize + 1))
        })
    }

    pub fn uuid(&self, device: DeviceHandle, uuid: *mut c_char, length: c_uint) -> Return {
        if self.is_mig_device(device) {
            return instances::mig_device_uuid(device, uuid, length);
        }
        self.with_device(device, |d| put_str(uuid, length, &d.uuid))
    }

    pub fn name(&self, device: DeviceHandle, name: *mut c_char, length: c_uint) -> Return {
        self.with_device(device, |d| put_str(name, length, &d.name))
    }

    pub fn minor_number(&self, device: DeviceHandle, minor: *mut c_uint) -> Return {
        self.with_device(device, |d| supported(d.minor, |m| put(minor, m)))
    }

    pub fn num_cores(&self, device: DeviceHandle, cores: *mut c_uint) -> Return {
        self.with_device(device, |d| supported(d.cores, |c| put(cores, c)))
    }

    /// The v2 memory record (version checked), whose `used` leaves the driver's reservation out.
    pub fn memory_v2(&self, device: DeviceHandle, memory: *mut abi::MemoryV2) -> Return {
        let version = abi::version_of(memory.cast::<c_uint>());
        if self.is_mig_device(device) {
            if version != Some(abi::MEMORY_V2) {
                return abi::ERROR_ARGUMENT_VERSION_MISMATCH;
            }
            return match instances::mig_device_memory(device) {
                Ok((total, used)) => put(
                    memory,
                    abi::MemoryV2 {
                        version: abi::MEMORY_V2,
                        total: total * abi::MIB,
                        reserved: 0,
                        free: (total - used) * abi::MIB,
                        used: used * abi::MIB,
                    },
                ),
                Err(status) => status,
            };
        }
        self.with_device(device, |d| {
            match version {
                None => return abi::ERROR_INVALID_ARGUMENT,
                Some(abi::MEMORY_V2) => {}
                Some(_) => return abi::ERROR_ARGUMENT_VERSION_MISMATCH,
            }
            let used = match (d.memory_used_mib, self.flavour) {
                (Some(used), _) => used,
                (None, Flavour::Hgml) => 0,
                (None, Flavour::Nvml) => return abi::ERROR_NOT_SUPPORTED,
            };
            let total = d.memory_total_mib * abi::MIB;
            let reserved = d.memory_reserved_mib * abi::MIB;
            let used = used * abi::MIB;
            put(
                memory,
                abi::MemoryV2 {
                    version: abi::MEMORY_V2,
                    total,
                    reserved,
                    free: total.saturating_sub(reserved).saturating_sub(used),
                    used,
                },
            )
        })
    }

    /// The legacy 52-byte PCI record, whose bus id string sits where the 68-byte one keeps
    /// `busIdLegacy`: the hardest layout a caller has to read.
    pub fn pci_info_legacy(&self, device: DeviceHandle, pci: *mut abi::PciInfoLegacy) -> Return {
        self.with_device(device, |d| {
            let Some((domain, bus, dev)) = abi::bus_fields(&d.pci_bus_id) else {
                return abi::ERROR_UNKNOWN;
            };
            put(
                pci,
                abi::PciInfoLegacy {
                    bus_id: abi::c_array(&abi::legacy_bus_id(domain, bus, dev)),
                    domain,
                    bus,
                    device: dev,
                    pci_device_id: d.pci_device_id,
                    pci_sub_system_id: d.pci_sub_system_id,
                    reserved: [0; 4],
                },
            )
        })
    }

    /// The compute capability (CUDA's, HGGC's): major and minor.
    pub fn compute_capability(
        &self,
        device: DeviceHandle,
        major: *mut c_int,
        minor: *mut c_int,
    ) -> Return {
        self.with_device(device, |d| {
            supported(d.compute_capability, |cc| {
                if major.is_null() || minor.is_null() {
                    return abi::ERROR_INVALID_ARGUMENT;
                }
                put(major, cc.major);
                put(minor, cc.minor)
            })
        })
    }

    pub fn mig_mode(
        &self,
        device: DeviceHandle,
        current: *mut c_uint,
        pending: *mut c_uint,
    ) -> Return {
        self.with_device(device, |d| {
            supported(d.mig_mode, |m| {
                if current.is_null() || pending.is_null() {
                    return abi::ERROR_INVALID_ARGUMENT;
                }
                put(current, m.current);
                put(pending, m.pending)
            })
        })
    }

    /// The named v2 profile record; the caller sets its version word, as for every versioned
    /// call.
    pub fn profile_info_v2(
        &self,
        device: DeviceHandle,
        profile: c_uint,
        info: *mut abi::GpuInstanceProfileInfoV2,
    ) -> Return {
        self.with_device(device, |d| {
            match abi::version_of(info.cast::<c_uint>()) {
                None => return abi::ERROR_INVALID_ARGUMENT,
                Some(abi::PROFILE_INFO_V2) => {}
                Some(_) => return abi::ERROR_ARGUMENT_VERSION_MISMATCH,
            }
            let Some(p) = profile_at(d, profile) else {
                return abi::ERROR_NOT_SUPPORTED;
            };
            put(
                info,
                abi::GpuInstanceProfileInfoV2 {
                    version: abi::PROFILE_INFO_V2,
                    id: p.id,
                    is_p2p_supported: 0,
                    slice_count: p.slice_count,
                    instance_count: p.instance_count,
                    multiprocessor_count: 0,
                    copy_engine_count: 0,
                    decoder_count: 0,
                    encoder_count: 0,
                    jpeg_count: 0,
                    ofa_count: 0,
                    memory_size_mb: p.memory_size_mb,
                    name: abi::c_array(&p.name),
                },
            )
        })
    }

    /// The legal slots of the profile with creation id `profile_id` on an empty card: with a
    /// null buffer, the count; else up to `*count` slots and the number written.
    pub fn possible_placements(
        &self,
        device: DeviceHandle,
        profile_id: c_uint,
        placements: *mut abi::GpuInstancePlacement,
        count: *mut c_uint,
    ) -> Return {
        self.with_device(device, |d| {
            let profile = d.mig_profiles.iter().find(|p| p.id == profile_id);
            let Some(p) = profile.filter(|_| mig_enabled(d)) else {
                return abi::ERROR_NOT_SUPPORTED;
            };
            if count.is_null() {
                return abi::ERROR_INVALID_ARGUMENT;
            }
            write_placements(&p.placements, placements, count)
        })
    }

    pub fn utilization(&self, device: DeviceHandle, utilization: *mut abi::Utilization) -> Return {
        self.with_device(device, |d| {
            supported(d.utilization, |u| {
                put(
                    utilization,
                    abi::Utilization {
                        gpu: u.gpu,
                        memory: u.memory,
                    },
                )
            })
        })
    }

    pub fn temperature(&self, device: DeviceHandle, sensor: c_uint, temp: *mut c_uint) -> Return {
        self.with_device(device, |d| {
            if sensor != abi::TEMPERATURE_GPU {
                return abi::ERROR_INVALID_ARGUMENT;
            }
            supported(d.temperature, |t| put(temp, t))
        })
    }

    pub fn power_usage(&self, device: DeviceHandle, power: *mut c_uint) -> Return {
        self.with_device(device, |d| supported(d.power_usage_mw, |p| put(power, p)))
    }
}

/// Whether the card is in MIG mode.
pub fn mig_enabled(d: &Device) -> bool {
    d.mig_mode
        .is_some_and(|m| m.current == abi::DEVICE_MIG_ENABLE)
}

/// The fixture profile at enumeration `index`, while the card is in MIG mode.
pub fn profile_at(d: &Device, index: c_uint) -> Option<&fixture::MigProfile> {
    d.mig_profiles
        .iter()
        .find(|p| p.index == index)
        .filter(|_| mig_enabled(d))
}

/// The count-then-fill protocol of the placement query: a null buffer asks for the count; a
/// buffer whose capacity (`*count` on entry, non-null) is too small gets
/// `*_ERROR_INSUFFICIENT_SIZE`.
fn write_placements(
    slots: &[fixture::Slot],
    placements: *mut abi::GpuInstancePlacement,
    count: *mut c_uint,
) -> Return {
    let wanted = slots.len() as c_uint;
    if placements.is_null() {
        return put(count, wanted);
    }
    // SAFETY: `count` is non-null (checked by the caller); it holds the buffer's capacity.
    let capacity = unsafe { count.read() };
    if capacity < wanted {
        put(count, wanted);
        return abi::ERROR_INSUFFICIENT_SIZE;
    }
    for (i, slot) in slots.iter().enumerate() {
        // SAFETY: `i < wanted <= capacity`, the number of writable placements the caller
        // promised at `placements`.
        unsafe {
            placements.add(i).write(abi::GpuInstancePlacement {
                start: slot.start,
                size: slot.size,
            })
        };
    }
    put(count, wanted)
}
