//! The command reference's `detect` and `monitor` examples read into the API types and write back
//! unchanged.

use std::path::PathBuf;

use gpustack_api::{devices::DevicesGroup, monitor::MetricsGroup, yaml};

/// One of the command reference's example outputs, kept verbatim as a fixture.
fn example(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seed")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[test]
fn detect_example_round_trips() {
    let seed = example("detect-rx-7800-xt.yaml");
    let groups: Vec<DevicesGroup> = serde_yaml_ng::from_str(&seed).unwrap();
    assert_eq!(groups.len(), 1);
    let acc = &groups[0].accelerators[0];
    assert_eq!(groups[0].runtime_version, "7.2");
    assert_eq!(acc.physical_indexes, [1, 128]);
    assert_eq!(acc.topology.pci_bus_id, "0000:04:00.0");
    assert_eq!(acc.status.logical_sliced.as_ref().unwrap().count, 128);

    let written = yaml::to_string(&groups).unwrap();
    // The seed indents the two fields under `logicalSliced` by four spaces where every other
    // mapping uses two; that is the document's typesetting, not a YAML difference.
    let seed_normalised = seed.replace("\n            ", "\n          ");
    assert_eq!(written, seed_normalised);
    let reread: Vec<DevicesGroup> = serde_yaml_ng::from_str(&written).unwrap();
    assert_eq!(reread, groups);
}

#[test]
fn monitor_example_round_trips() {
    let seed = example("monitor-rx-7800-xt.yaml");
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&seed).unwrap();
    assert_eq!(groups[0].accelerators[0].memory_usage, Some(174));
    assert_eq!(
        groups[0].timestamp.to_string(),
        "2026-08-29T08:01:43.565038175+08:00"
    );
    assert_eq!(yaml::to_string(&groups).unwrap(), seed);
}
