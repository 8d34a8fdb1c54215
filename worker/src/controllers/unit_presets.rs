//! The unit resources of derived InstanceTypes (worker.md §2.2 "Derived IT"): how much CPU and
//! memory one card's worth of an instance brings, per (manufacturer, product). The table ships
//! compiled in (`unit_resources_preset.yaml`, parsed once at startup and passed down); the
//! setting `instance-type-unit-resources-preset` holds an admin's table of the same shape,
//! consulted first, so sizes change without a rebuild.

use std::collections::BTreeMap;

use gpustack_api::Manufacturer;
use serde::Deserialize;

/// The table the worker ships.
pub const BUILTIN: &str = include_str!("unit_resources_preset.yaml");

/// When no entry matches: per card of an accelerated pool, and for CPU-only pools.
pub const ACCELERATED_FALLBACK: (&str, &str) = ("4", "16Gi");
/// Per CPU-only pool when no entry matches.
pub const CPU_ONLY: (&str, &str) = ("1", "2Gi");

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Units {
    cpu: String,
    ram: String,
}

/// One entry: the words a product name must have, and what a card of it brings.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    key: String,
    words: Vec<String>,
    cpu: String,
    ram: String,
}

impl Entry {
    fn matches(&self, product: &[String]) -> bool {
        self.words.iter().all(|w| match w.strip_suffix('*') {
            Some(prefix) => product.iter().any(|p| p.starts_with(prefix)),
            None => product.contains(w),
        })
    }

    /// More words, then longer words, are more specific.
    fn specificity(&self) -> (usize, usize) {
        (self.words.len(), self.key.len())
    }
}

/// A parsed table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnitPresets {
    by_manufacturer: BTreeMap<Manufacturer, Vec<Entry>>,
}

/// Why a unit resources table was refused.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    /// Not YAML of the expected shape.
    #[error(
        "the unit resources table is not valid YAML of manufacturer → product → {{cpu, ram}}: {0}"
    )]
    Shape(#[from] serde_yaml_ng::Error),
    /// A manufacturer the worker does not know.
    #[error("unknown manufacturer {0:?}")]
    Manufacturer(String),
    /// A value that is not a quantity of its kind.
    #[error("{manufacturer} {product:?}: {field} {value:?} is not a {what}")]
    Quantity {
        /// The entry's manufacturer.
        manufacturer: String,
        /// The entry's product key.
        product: String,
        /// The field (`cpu`, `ram`).
        field: &'static str,
        /// The value given.
        value: String,
        /// What it should be.
        what: &'static str,
    },
    /// A product key without words (the key, its manufacturer).
    #[error("{manufacturer}: product key {0:?} has no words", manufacturer = .1)]
    EmptyKey(String, String),
}

/// The lowercase alphanumeric words of a product name.
fn words(text: &str) -> Vec<String> {
    text.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '*')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

fn cpu_ok(v: &str) -> bool {
    let (number, milli) = match v.strip_suffix('m') {
        Some(n) => (n, true),
        None => (v, false),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, "0"));
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    digits(whole)
        && digits(frac)
        && !(milli && number.contains('.'))
        && number.chars().any(|c| c.is_ascii_digit() && c != '0')
}

fn memory_ok(v: &str) -> bool {
    let digits = ["Ki", "Mi", "Gi", "Ti", "K", "M", "G", "T"]
        .iter()
        .find_map(|s| v.strip_suffix(s))
        .unwrap_or(v);
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && digits.chars().any(|c| c != '0')
}

impl UnitPresets {
    /// The compiled-in table.
    pub fn builtin() -> Result<Self, PresetError> {
        Self::parse(BUILTIN)
    }

    /// A table from its YAML; blank text is an empty table.
    pub fn parse(text: &str) -> Result<Self, PresetError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let raw: BTreeMap<String, BTreeMap<String, Units>> = serde_yaml_ng::from_str(text)?;
        let mut by_manufacturer = BTreeMap::new();
        for (manufacturer, products) in raw {
            let m: Manufacturer = manufacturer
                .parse()
                .map_err(|_| PresetError::Manufacturer(manufacturer.clone()))?;
            let mut entries = Vec::new();
            for (key, units) in products {
                let bad = |field, value: &str, what| PresetError::Quantity {
                    manufacturer: manufacturer.clone(),
                    product: key.clone(),
                    field,
                    value: value.to_owned(),
                    what,
                };
                if !cpu_ok(&units.cpu) {
                    return Err(bad(
                        "cpu",
                        &units.cpu,
                        "positive CPU quantity (4, 2.5, 500m)",
                    ));
                }
                if !memory_ok(&units.ram) {
                    return Err(bad("ram", &units.ram, "positive memory quantity (16Gi)"));
                }
                let w = words(&key);
                if w.is_empty() || w.iter().any(|x| x == "*") {
                    return Err(PresetError::EmptyKey(key, manufacturer.clone()));
                }
                entries.push(Entry {
                    key,
                    words: w,
                    cpu: units.cpu,
                    ram: units.ram,
                });
            }
            by_manufacturer.insert(m, entries);
        }
        Ok(Self { by_manufacturer })
    }

    /// The most specific entry for the product, as `(cpu, ram)`.
    pub fn lookup(&self, manufacturer: Manufacturer, product: &str) -> Option<(&str, &str)> {
        let product = words(product);
        self.by_manufacturer
            .get(&manufacturer)?
            .iter()
            .filter(|e| e.matches(&product))
            .max_by(|a, b| {
                a.specificity()
                    .cmp(&b.specificity())
                    // Equal: the alphabetically first key wins, whatever the map's order.
                    .then_with(|| b.key.cmp(&a.key))
            })
            .map(|e| (e.cpu.as_str(), e.ram.as_str()))
    }
}

/// The unit resources of a pool: the admin's table first, then the shipped one, then the
/// fallbacks. `accelerator` is the pool's (manufacturer, product), `None` for CPU-only pools.
pub fn unit_resources(
    builtin: &UnitPresets,
    admin: Option<&UnitPresets>,
    accelerator: Option<(Manufacturer, &str)>,
) -> (String, String) {
    let (cpu, ram) = match accelerator {
        None => CPU_ONLY,
        Some((m, product)) => admin
            .and_then(|t| t.lookup(m, product))
            .or_else(|| builtin.lookup(m, product))
            .unwrap_or(ACCELERATED_FALLBACK),
    };
    (cpu.to_owned(), ram.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> UnitPresets {
        UnitPresets::builtin().expect("the shipped table parses")
    }

    #[test]
    fn the_shipped_table_sizes_well_known_cards() {
        let t = builtin();
        let n = Manufacturer::Nvidia;
        let cases = [
            (n, "NVIDIA-H100-80GB-HBM3", ("16", "192Gi")),
            (n, "NVIDIA-H200", ("24", "256Gi")),
            (n, "NVIDIA-A100-SXM4-40GB", ("8", "80Gi")),
            (n, "NVIDIA-A100-SXM4-80GB", ("12", "160Gi")),
            (n, "NVIDIA-A100-PCIE", ("12", "96Gi")),
            (n, "NVIDIA-L40S", ("8", "96Gi")),
            (n, "NVIDIA-L4", ("4", "48Gi")),
            (n, "NVIDIA-GeForce-RTX-4090", ("6", "48Gi")),
            (Manufacturer::Amd, "AMD-Instinct-MI300X", ("24", "384Gi")),
            (Manufacturer::Amd, "AMD-Instinct-MI250X", ("12", "256Gi")),
            (Manufacturer::Amd, "AMD-Radeon-RX-7800-XT", ("4", "32Gi")),
            (Manufacturer::Ascend, "Ascend910B3", ("24", "128Gi")),
        ];
        for (m, product, want) in cases {
            assert_eq!(t.lookup(m, product), Some(want), "{m} {product}");
        }
        // Words, not substrings: an L4 entry does not size an L40S, nor an A10 an A100.
        assert_eq!(t.lookup(n, "NVIDIA-A10"), Some(("6", "48Gi")));
        assert_eq!(t.lookup(n, "NVIDIA-Unknown-9000"), None);
        assert_eq!(
            t.lookup(Manufacturer::Amd, "NVIDIA-H100"),
            None,
            "per manufacturer"
        );
    }

    #[test]
    fn an_admin_table_comes_first_and_fallbacks_last() {
        let t = builtin();
        let admin =
            UnitPresets::parse("nvidia:\n  H100 80GB: {cpu: \"20\", ram: 200Gi}\n").unwrap();
        let h100 = Some((Manufacturer::Nvidia, "NVIDIA-H100-80GB-HBM3"));
        assert_eq!(
            unit_resources(&t, Some(&admin), h100),
            ("20".into(), "200Gi".into())
        );
        assert_eq!(
            unit_resources(&t, None, h100),
            ("16".into(), "192Gi".into())
        );
        let a100 = Some((Manufacturer::Nvidia, "NVIDIA-A100-SXM4-40GB"));
        assert_eq!(
            unit_resources(&t, Some(&admin), a100),
            ("8".into(), "80Gi".into())
        );
        let unknown = Some((Manufacturer::Metax, "MXC500"));
        assert_eq!(
            unit_resources(&t, Some(&admin), unknown),
            ("4".into(), "16Gi".into())
        );
        assert_eq!(
            unit_resources(&t, Some(&admin), None),
            ("1".into(), "2Gi".into())
        );
        assert_eq!(UnitPresets::parse("  ").unwrap(), UnitPresets::default());
    }

    #[test]
    fn bad_tables_are_refused_with_what_is_wrong() {
        let e = |t: &str| UnitPresets::parse(t).unwrap_err().to_string();
        assert!(e("nvidia: [1, 2]").contains("not valid YAML"));
        assert!(
            e("acme:\n  X1: {cpu: \"1\", ram: 1Gi}\n").contains("unknown manufacturer \"acme\"")
        );
        assert!(e("nvidia:\n  H100: {cpu: lots, ram: 1Gi}\n").contains("cpu \"lots\""));
        assert!(e("nvidia:\n  H100: {cpu: \"0\", ram: 1Gi}\n").contains("cpu \"0\""));
        assert!(e("nvidia:\n  H100: {cpu: \"4\", ram: 16GB}\n").contains("ram \"16GB\""));
        assert!(e("nvidia:\n  H100: {cpu: \"4\", ram: 1Gi, gpu: 1}\n").contains("not valid YAML"));
        assert!(UnitPresets::parse("nvidia:\n  H100: {cpu: 500m, ram: 1536Mi}\n").is_ok());
    }
}
