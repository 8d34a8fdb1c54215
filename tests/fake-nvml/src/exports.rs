//! The exports every NVML-shaped library has, generated under a symbol prefix: `nvml` for
//! NVIDIA's (and IXML's) names, `hgml` for T-Head's. Each is a thin `extern "C"` wrapper of the
//! [`crate::library::Library`] body of the same name; what only one library exports is written
//! out in its own module.

/// Exports the shared calls of `$lib` (a `static` [`crate::library::Library`]) as
/// `<$prefix>Init_v2`, `<$prefix>DeviceGetUUID`, …, in the module it is invoked in.
#[macro_export]
macro_rules! nvml_shaped_exports {
    ($prefix:literal, $lib:path) => {
        use std::ffi::{c_char, c_uint};

        use $crate::abi::{self, DeviceHandle, Return};

        #[unsafe(export_name = concat!($prefix, "Init_v2"))]
        pub extern "C" fn init_v2() -> Return {
            $lib.init()
        }

        #[unsafe(export_name = concat!($prefix, "Shutdown"))]
        pub extern "C" fn shutdown() -> Return {
            $lib.shutdown()
        }

        #[unsafe(export_name = concat!($prefix, "SystemGetDriverVersion"))]
        pub extern "C" fn system_get_driver_version(
            version: *mut c_char,
            length: c_uint,
        ) -> Return {
            $lib.driver_version(version, length)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetCount_v2"))]
        pub extern "C" fn device_get_count_v2(count: *mut c_uint) -> Return {
            $lib.device_count(count)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetHandleByIndex_v2"))]
        pub extern "C" fn device_get_handle_by_index_v2(
            index: c_uint,
            device: *mut DeviceHandle,
        ) -> Return {
            $lib.handle_by_index(index, device)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetUUID"))]
        pub extern "C" fn device_get_uuid(
            device: DeviceHandle,
            uuid: *mut c_char,
            length: c_uint,
        ) -> Return {
            $lib.uuid(device, uuid, length)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetName"))]
        pub extern "C" fn device_get_name(
            device: DeviceHandle,
            name: *mut c_char,
            length: c_uint,
        ) -> Return {
            $lib.name(device, name, length)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetMinorNumber"))]
        pub extern "C" fn device_get_minor_number(
            device: DeviceHandle,
            minor: *mut c_uint,
        ) -> Return {
            $lib.minor_number(device, minor)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetNumGpuCores"))]
        pub extern "C" fn device_get_num_gpu_cores(
            device: DeviceHandle,
            cores: *mut c_uint,
        ) -> Return {
            $lib.num_cores(device, cores)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetMemoryInfo_v2"))]
        pub extern "C" fn device_get_memory_info_v2(
            device: DeviceHandle,
            memory: *mut abi::MemoryV2,
        ) -> Return {
            $lib.memory_v2(device, memory)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetMigMode"))]
        pub extern "C" fn device_get_mig_mode(
            device: DeviceHandle,
            current: *mut c_uint,
            pending: *mut c_uint,
        ) -> Return {
            $lib.mig_mode(device, current, pending)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetGpuInstanceProfileInfoV"))]
        pub extern "C" fn device_get_gpu_instance_profile_info_v(
            device: DeviceHandle,
            profile: c_uint,
            info: *mut abi::GpuInstanceProfileInfoV2,
        ) -> Return {
            $lib.profile_info_v2(device, profile, info)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetGpuInstancePossiblePlacements_v2"))]
        pub extern "C" fn device_get_gpu_instance_possible_placements_v2(
            device: DeviceHandle,
            profile_id: c_uint,
            placements: *mut abi::GpuInstancePlacement,
            count: *mut c_uint,
        ) -> Return {
            $lib.possible_placements(device, profile_id, placements, count)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetUtilizationRates"))]
        pub extern "C" fn device_get_utilization_rates(
            device: DeviceHandle,
            utilization: *mut abi::Utilization,
        ) -> Return {
            $lib.utilization(device, utilization)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetTemperature"))]
        pub extern "C" fn device_get_temperature(
            device: DeviceHandle,
            sensor: c_uint,
            temp: *mut c_uint,
        ) -> Return {
            $lib.temperature(device, sensor, temp)
        }

        #[unsafe(export_name = concat!($prefix, "DeviceGetPowerUsage"))]
        pub extern "C" fn device_get_power_usage(
            device: DeviceHandle,
            power: *mut c_uint,
        ) -> Return {
            $lib.power_usage(device, power)
        }
    };
}
