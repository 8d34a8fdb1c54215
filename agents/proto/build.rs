//! Compiles the vendored `.proto` files with the `protoc` shipped by `protoc-bin-vendored`, so a
//! build needs nothing from the system. Client and server code are generated for every service.

use std::path::PathBuf;

const PROTOS: [&str; 3] = [
    "proto/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto",
    "proto/k8s.io/kubelet/pkg/apis/podresources/v1/api.proto",
    "proto/csi/v1/csi.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let includes = [
        // One root: both kubelet files are named `api.proto`, so they are told apart by path.
        PathBuf::from("proto"),
        // google/protobuf/{descriptor,timestamp,wrappers}.proto for CSI.
        protoc_bin_vendored::include_path()?,
    ];
    let protos: Vec<PathBuf> = PROTOS.iter().map(PathBuf::from).collect();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(config, &protos, &includes)?;
    Ok(())
}
