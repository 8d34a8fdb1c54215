//! The accelerator labels published on the Node (devices.md §3.4), as a pure function of the
//! detected groups; and the canonical merge of this agent's groups into a shared `Devices`.

use std::collections::BTreeMap;

use gpustack_api::{
    Manufacturer,
    devices::DevicesGroup,
    labels::{ACCELERATABLE, ACCELERATABLE_PREFIX},
};

/// A label value as Kubernetes accepts it: at most 63 of `[A-Za-z0-9._-]`, alphanumeric at
/// both ends; anything else becomes `-`.
pub fn label_value(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// Memory in MiB as a quantity: whole GiB as `<n>Gi`, else `<n>Mi`.
fn quantity(mib: u64) -> String {
    if mib.is_multiple_of(1024) {
        format!("{}Gi", mib / 1024)
    } else {
        format!("{mib}Mi")
    }
}

/// The labels for `groups`; `count` counts healthy cards, so a card turning unhealthy shows.
pub fn node_labels(groups: &[DevicesGroup]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if groups.iter().all(|g| g.accelerators.is_empty()) {
        return out;
    }
    out.insert(ACCELERATABLE.to_owned(), "true".to_owned());
    for g in groups.iter().filter(|g| !g.accelerators.is_empty()) {
        let m = g.manufacturer.as_str();
        let mut put = |suffix: String, value: String| {
            let value = label_value(&value);
            if !value.is_empty() {
                out.insert(format!("{ACCELERATABLE_PREFIX}{suffix}"), value);
            }
        };
        put(m.to_owned(), "true".into());
        put(format!("{m}.driver-version"), g.driver_version.clone());
        put(format!("{m}.runtime-version"), g.runtime_version.clone());
        let key = format!("{m}-{}", g.id);
        put(key.clone(), "true".into());
        put(format!("{key}.product"), g.name.clone());
        put(format!("{key}.memory"), quantity(g.memory));
        if let Some(c) = g.cores {
            put(format!("{key}.cores"), c.to_string());
        }
        let healthy = g
            .accelerators
            .iter()
            .filter(|a| !a.status.unhealthy)
            .count();
        put(format!("{key}.count"), healthy.to_string());
        put(format!("{key}.family"), g.family.clone());
        put(format!("{key}.comcap"), g.compute_capability.clone());
    }
    out
}

/// Whether `key` is one of ours for `manufacturers` (so a stale one may be removed).
pub fn owned_label(key: &str, manufacturers: &[Manufacturer]) -> bool {
    key == ACCELERATABLE
        || key.strip_prefix(ACCELERATABLE_PREFIX).is_some_and(|rest| {
            manufacturers.iter().any(|m| {
                let m = m.as_str();
                rest == m
                    || rest.starts_with(&format!("{m}."))
                    || rest.starts_with(&format!("{m}-"))
            })
        })
}

/// The change to the Node's labels that leaves exactly `want` of this agent's labels there:
/// `Some(value)` sets a key, `None` removes one. Only keys of `ours` are removed, and only
/// where `removable` allows (the NFD cleanup removes only what this agent's field manager
/// wrote); the shared marker stays while another manufacturer's label is on the Node.
pub fn node_label_patch(
    have: &BTreeMap<String, String>,
    mut want: BTreeMap<String, String>,
    ours: &[Manufacturer],
    removable: impl Fn(&str) -> bool,
) -> BTreeMap<String, Option<String>> {
    let others_remain = have
        .keys()
        .any(|k| owned_label(k, &Manufacturer::ALL) && !owned_label(k, ours) && k != ACCELERATABLE);
    if want.is_empty() && others_remain {
        want.insert(ACCELERATABLE.into(), "true".into());
    }
    let mut patch = BTreeMap::new();
    for k in have.keys() {
        if owned_label(k, ours) && !want.contains_key(k) && removable(k) {
            patch.insert(k.clone(), None);
        }
    }
    for (k, v) in want {
        if have.get(&k) != Some(&v) {
            patch.insert(k, Some(v));
        }
    }
    patch
}

/// `current` with the groups of `ours` replaced by `detected`, in canonical order
/// (manufacturer, then first accelerator index).
pub fn align_groups(
    current: &[DevicesGroup],
    ours: &[Manufacturer],
    detected: &[DevicesGroup],
) -> Vec<DevicesGroup> {
    let mut out: Vec<DevicesGroup> = current
        .iter()
        .filter(|g| !ours.contains(&g.manufacturer))
        .cloned()
        .collect();
    out.extend(detected.iter().cloned());
    for g in &mut out {
        g.accelerators.sort_by_key(|a| a.index);
    }
    out.sort_by(|a, b| {
        (a.manufacturer, a.accelerators.first().map(|x| x.index))
            .cmp(&(b.manufacturer, b.accelerators.first().map(|x| x.index)))
    });
    out
}

#[cfg(test)]
mod tests {
    use gpustack_api::devices::Accelerator;

    use super::*;

    fn h100(unhealthy_second: bool) -> DevicesGroup {
        let mut b = Accelerator {
            id: "GPU-b".into(),
            index: 1,
            ..Accelerator::default()
        };
        b.status.unhealthy = unhealthy_second;
        DevicesGroup {
            cores: Some(16896),
            driver_version: "550.54.15".into(),
            runtime_version: "12.4".into(),
            compute_capability: "9.0".into(),
            family: "Hopper".into(),
            accelerators: vec![
                Accelerator {
                    id: "GPU-a".into(),
                    ..Accelerator::default()
                },
                b,
            ],
            ..DevicesGroup::new(
                Manufacturer::Nvidia,
                "h100-80gb-hbm3",
                "NVIDIA H100 80GB HBM3",
                81920,
            )
        }
    }

    #[test]
    fn labels_of_a_group() {
        let l = node_labels(&[h100(false)]);
        let p = "acceleratable.feature.gpustack.ai/";
        let want: BTreeMap<String, String> = [
            ("feature.gpustack.ai/acceleratable".to_owned(), "true"),
            (format!("{p}nvidia"), "true"),
            (format!("{p}nvidia.driver-version"), "550.54.15"),
            (format!("{p}nvidia.runtime-version"), "12.4"),
            (format!("{p}nvidia-h100-80gb-hbm3"), "true"),
            (
                format!("{p}nvidia-h100-80gb-hbm3.product"),
                "NVIDIA-H100-80GB-HBM3",
            ),
            (format!("{p}nvidia-h100-80gb-hbm3.memory"), "80Gi"),
            (format!("{p}nvidia-h100-80gb-hbm3.cores"), "16896"),
            (format!("{p}nvidia-h100-80gb-hbm3.count"), "2"),
            (format!("{p}nvidia-h100-80gb-hbm3.family"), "Hopper"),
            (format!("{p}nvidia-h100-80gb-hbm3.comcap"), "9.0"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
        assert_eq!(l, want);
        assert_eq!(
            node_labels(&[h100(true)])[&format!("{p}nvidia-h100-80gb-hbm3.count")],
            "1"
        );
        assert!(node_labels(&[]).is_empty());
    }

    #[test]
    fn label_patch_removes_only_ours_and_keeps_the_marker_for_others() {
        let have: BTreeMap<String, String> = [
            ("feature.gpustack.ai/acceleratable", "true"),
            ("acceleratable.feature.gpustack.ai/nvidia", "true"),
            ("acceleratable.feature.gpustack.ai/nvidia-h100.count", "8"),
            ("kubernetes.io/os", "linux"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let ours = [Manufacturer::Nvidia];
        let all = node_label_patch(&have, BTreeMap::new(), &ours, |_| true);
        let removed: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(
            removed,
            [
                "acceleratable.feature.gpustack.ai/nvidia",
                "acceleratable.feature.gpustack.ai/nvidia-h100.count",
                "feature.gpustack.ai/acceleratable"
            ]
        );
        assert!(all.values().all(Option::is_none));
        // Only what `removable` allows.
        let some = node_label_patch(&have, BTreeMap::new(), &ours, |k| k.ends_with(".count"));
        assert_eq!(
            some,
            [(
                "acceleratable.feature.gpustack.ai/nvidia-h100.count".to_owned(),
                None
            )]
            .into()
        );
        // Another manufacturer's label keeps the marker; a wanted value is set.
        let mut with_amd = have.clone();
        with_amd.insert(
            "acceleratable.feature.gpustack.ai/amd".into(),
            "true".into(),
        );
        let kept = node_label_patch(&with_amd, BTreeMap::new(), &ours, |_| true);
        assert!(!kept.contains_key("feature.gpustack.ai/acceleratable"));
        assert!(!kept.contains_key("acceleratable.feature.gpustack.ai/amd"));
        let want = [(
            "acceleratable.feature.gpustack.ai/nvidia-h100.count".to_owned(),
            "7".to_owned(),
        )]
        .into();
        let set = node_label_patch(&have, want, &ours, |_| true);
        assert_eq!(
            set["acceleratable.feature.gpustack.ai/nvidia-h100.count"],
            Some("7".to_owned())
        );
    }

    #[test]
    fn ownership_and_values() {
        let ours = [Manufacturer::Nvidia];
        assert!(owned_label(
            "acceleratable.feature.gpustack.ai/nvidia-h100.count",
            &ours
        ));
        assert!(owned_label(
            "acceleratable.feature.gpustack.ai/nvidia",
            &ours
        ));
        assert!(!owned_label(
            "acceleratable.feature.gpustack.ai/amd-x",
            &ours
        ));
        assert!(!owned_label("kubernetes.io/os", &ours));
        assert_eq!(label_value(" a b/c "), "a-b-c");
        assert_eq!(label_value(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn align_keeps_other_manufacturers_in_canonical_order() {
        let amd = DevicesGroup {
            accelerators: vec![Accelerator {
                id: "GPU-z".into(),
                ..Accelerator::default()
            }],
            ..DevicesGroup::new(Manufacturer::Amd, "mi300x", "MI300X", 1)
        };
        let old = DevicesGroup::new(Manufacturer::Nvidia, "old", "old", 1);
        let got = align_groups(&[old, amd.clone()], &[Manufacturer::Nvidia], &[h100(false)]);
        let ids: Vec<_> = got.iter().map(|g| g.id.as_str()).collect();
        assert_eq!(ids, ["mi300x", "h100-80gb-hbm3"]);
    }
}
