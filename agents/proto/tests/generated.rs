//! The committed code under `src/generated/` is what the `.proto` files compile to: generated
//! here with the vendored `protoc`, exactly as a build script would, and compared file by file.

use std::path::{Path, PathBuf};

/// The `.proto` files, relative to `proto/`, the one include root: both kubelet files are named
/// `api.proto`, so they are told apart by path.
const PROTOS: [&str; 3] = [
    "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto",
    "k8s.io/kubelet/pkg/apis/podresources/v1/api.proto",
    "csi/v1/csi.proto",
];

/// The files the generator writes, one per protobuf package, in name order.
const GENERATED: [&str; 3] = ["csi.v1.rs", "v1.rs", "v1beta1.rs"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles the `.proto` files into `out`: client and server code for every service.
fn generate(out: &Path) {
    let root = crate_dir().join("proto");
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path().expect("the vendored protoc"));
    let includes = [
        root.clone(),
        // google/protobuf/{descriptor,timestamp,wrappers}.proto for CSI.
        protoc_bin_vendored::include_path().expect("the vendored protoc's includes"),
    ];
    let protos: Vec<PathBuf> = PROTOS.iter().map(|p| root.join(p)).collect();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(out)
        .compile_with_config(config, &protos, &includes)
        .expect("the .proto files compile");
}

#[test]
fn committed_code_is_what_the_protos_compile_to() {
    let committed = crate_dir().join("src/generated");
    // As the CRD manifests and the built-in schemas are regenerated (README, Layout).
    if std::env::var_os("GPUSTACK_UPDATE_PROTOS").is_some() {
        generate(&committed);
        return;
    }
    let out = tempfile::tempdir().unwrap();
    generate(out.path());
    let mut written: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, GENERATED, "the generator's files");
    for file in GENERATED {
        let fresh = std::fs::read_to_string(out.path().join(file)).unwrap();
        let have = std::fs::read_to_string(committed.join(file)).unwrap();
        assert!(
            fresh == have,
            "src/generated/{file} differs from what the .proto files compile to; rewrite it with \
             `GPUSTACK_UPDATE_PROTOS=1 cargo test -p gpustack-proto --test generated`"
        );
    }
}
