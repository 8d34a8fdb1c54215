//! Vendored protobuf definitions compiled with tonic (client and server code for every service).
//!
//! - [`deviceplugin::v1beta1`]: the kubelet device plugin API (`Registration`, `DevicePlugin`).
//! - [`podresources::v1`]: the kubelet pod-resources API (`PodResourcesLister`).
//! - [`csi::v1`]: the Container Storage Interface (`Identity`, `Controller`, `Node`).
//!
//! The `.proto` files live under `proto/`, each with its upstream origin and license.

/// The kubelet device plugin API.
pub mod deviceplugin {
    /// `k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1`.
    #[allow(clippy::all, missing_docs)]
    pub mod v1beta1 {
        tonic::include_proto!("v1beta1");

        /// The API version a plugin registers with.
        pub const VERSION: &str = "v1beta1";
        /// `Device.health` of a usable device.
        pub const HEALTHY: &str = "Healthy";
        /// `Device.health` of a device the kubelet must not hand out.
        pub const UNHEALTHY: &str = "Unhealthy";
        /// The kubelet's registration socket, relative to its device-plugin directory.
        pub const KUBELET_SOCKET: &str = "kubelet.sock";
    }
}

/// The kubelet pod-resources API.
pub mod podresources {
    /// `k8s.io/kubelet/pkg/apis/podresources/v1`.
    #[allow(clippy::all, missing_docs)]
    pub mod v1 {
        tonic::include_proto!("v1");
    }
}

/// The Container Storage Interface.
pub mod csi {
    /// `csi.v1`.
    #[allow(clippy::all, missing_docs)]
    pub mod v1 {
        tonic::include_proto!("csi.v1");
    }
}
