//! The command reference's `detect` and `monitor` examples read into the API types and write back
//! unchanged.

use std::path::PathBuf;

use gpustack_api::{devices::DevicesGroup, monitor::MetricsGroup, yaml};

fn seed() -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/seed/command-reference.txt");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The YAML block that starts with `first_line` and runs to the next blank line.
fn example(first_line: &str) -> String {
    let text = seed();
    let start = text
        .find(&format!("\n{first_line}\n"))
        .unwrap_or_else(|| panic!("the seed has no example starting {first_line:?}"))
        + 1;
    let end = text[start..]
        .find("\n\n")
        .map_or(text.len(), |e| start + e + 1);
    text[start..end].to_owned()
}

#[test]
fn detect_example_round_trips() {
    let seed = example("- id: radeon-rx-7800-xt");
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
    let seed = example("- manufacturer: amd");
    let groups: Vec<MetricsGroup> = serde_yaml_ng::from_str(&seed).unwrap();
    assert_eq!(groups[0].accelerators[0].memory_usage, Some(174));
    assert_eq!(
        groups[0].timestamp.to_string(),
        "2026-08-29T08:01:43.565038175+08:00"
    );
    assert_eq!(yaml::to_string(&groups).unwrap(), seed);
}
