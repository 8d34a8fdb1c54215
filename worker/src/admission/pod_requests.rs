//! What a Pod asks of accelerators: every resource key of the families (§3.1), read from each
//! container's limits (then requests), with the container group it sits in. The rules of both
//! Pod webhooks work on this, never on the Pod directly.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::quantity::Quantity;

/// The kind of container a request sits in (§3.4): init containers run to completion before
/// the app; native sidecars (`restartPolicy: Always` init containers) run beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// An init container.
    Init,
    /// An app container.
    App,
    /// A native sidecar.
    Sidecar,
}

impl Group {
    /// Where containers of this group are listed in the Pod.
    pub fn field(self) -> &'static str {
        match self {
            Group::Init | Group::Sidecar => "spec.initContainers",
            Group::App => "spec.containers",
        }
    }
}

/// The four ways to ask for an accelerator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// Whole cards, one Pod each (`<base>`).
    Exclusive,
    /// Whole cards shared by Pods (`<base>.shared`).
    Shared,
    /// Logical slices of a card (`<base>.sliced`).
    Sliced,
    /// Hardware partitions of a card (`<base>.partitioned`).
    Partitioned,
}

impl Family {
    /// Logical slices and hardware partitions divide one card.
    pub fn slicing(self) -> bool {
        matches!(self, Family::Sliced | Family::Partitioned)
    }
}

/// Which key of a family.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// `<base>`, `<base>.shared`, `<base>.sliced` or `<base>.partitioned`.
    Head,
    /// `.memory-percentage`: a share of one card's memory.
    MemoryPercentage,
    /// `.memory-mib`: memory of one card in MiB.
    MemoryMib,
    /// `.cores-percentage`: a share of one card's cores.
    CoresPercentage,
    /// `.sliced.units` / `.partitioned.units`: written by the mutating webhook, never trusted.
    Units,
    /// `.partitioned.<kind>-<profile>`: the profile's name after `partitioned.`.
    Profile(String),
}

/// A resource key read as a family member.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// The resource base (`nvidia.com/gpu`).
    pub base: String,
    /// The family the key belongs to.
    pub family: Family,
    /// Which key of the family.
    pub part: Part,
}

impl Key {
    /// The key a family is named by in messages (`nvidia.com/gpu.sliced`).
    pub fn family_name(&self) -> String {
        family_key(&self.base, self.family)
    }

    /// The full resource name of this key.
    pub fn name(&self) -> String {
        let head = self.family_name();
        match &self.part {
            Part::Head => head,
            Part::MemoryPercentage => format!("{head}.memory-percentage"),
            Part::MemoryMib => format!("{head}.memory-mib"),
            Part::CoresPercentage => format!("{head}.cores-percentage"),
            Part::Units => format!("{head}.units"),
            Part::Profile(p) => format!("{head}.{p}"),
        }
    }
}

/// `<base>` with the family's suffix.
pub fn family_key(base: &str, family: Family) -> String {
    match family {
        Family::Exclusive => base.to_owned(),
        Family::Shared => format!("{base}.shared"),
        Family::Sliced => format!("{base}.sliced"),
        Family::Partitioned => format!("{base}.partitioned"),
    }
}

/// The accelerator resource bases of this deployment (§3.1), with each manufacturer's
/// partition kind (for the example in messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bases {
    /// The bases, as resource names (`nvidia.com/gpu`).
    pub names: Vec<String>,
    kinds: std::collections::BTreeMap<String, String>,
}

impl Bases {
    /// The nine manufacturers' bases after the `GPUSTACK_<MFR>_*` overrides `env` gives.
    pub fn resolve(env: impl Fn(&str) -> Option<String>) -> Self {
        let resolved: Vec<_> = gpustack_api::manufacturer::Manufacturer::ALL
            .into_iter()
            .map(|m| m.resolve(&env))
            .collect();
        Bases {
            names: resolved.iter().map(|r| r.resource_name.clone()).collect(),
            kinds: resolved
                .into_iter()
                .filter_map(|r| Some((r.resource_name, r.partition_kind?)))
                .collect(),
        }
    }

    /// The partition kind of `base` (`mig`), or a placeholder where it has none.
    pub fn partition_kind(&self, base: &str) -> &str {
        self.kinds.get(base).map(String::as_str).unwrap_or("<kind>")
    }
}

/// Reads `name` as a member of one of `bases`' families; `None` for any other resource
/// (CPU, memory, `device.gpustack.ai/...` which Kueue does not meter).
pub fn classify(name: &str, bases: &[String]) -> Option<Key> {
    // The longest base first, so that a base that extends another is not misread.
    let mut sorted: Vec<&String> = bases.iter().collect();
    sorted.sort_by_key(|b| std::cmp::Reverse(b.len()));
    for base in sorted {
        let key = |family, part| {
            Some(Key {
                base: base.clone(),
                family,
                part,
            })
        };
        if name == base {
            return key(Family::Exclusive, Part::Head);
        }
        let Some(rest) = name
            .strip_prefix(base.as_str())
            .and_then(|r| r.strip_prefix('.'))
        else {
            continue;
        };
        return match rest {
            "shared" => key(Family::Shared, Part::Head),
            "sliced" => key(Family::Sliced, Part::Head),
            "sliced.memory-percentage" => key(Family::Sliced, Part::MemoryPercentage),
            "sliced.memory-mib" => key(Family::Sliced, Part::MemoryMib),
            "sliced.cores-percentage" => key(Family::Sliced, Part::CoresPercentage),
            "sliced.units" => key(Family::Sliced, Part::Units),
            "partitioned" => key(Family::Partitioned, Part::Head),
            "partitioned.units" => key(Family::Partitioned, Part::Units),
            r => match r.strip_prefix("partitioned.") {
                Some(profile) if !profile.is_empty() => {
                    key(Family::Partitioned, Part::Profile(profile.to_owned()))
                }
                _ => None,
            },
        };
    }
    None
}

/// One accelerator key of one container.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The container group it sits in.
    pub group: Group,
    /// The container's index in its list (`spec.containers` or `spec.initContainers`).
    pub index: usize,
    /// The container's name.
    pub container: String,
    /// The key, read as a family member.
    pub key: Key,
    /// The value as written.
    pub value: String,
    /// The value as a quantity, when it parses.
    pub amount: Option<Quantity>,
    /// Read from `limits` (else from `requests`).
    pub in_limits: bool,
}

impl Claim {
    /// `spec.containers[0].resources.limits[nvidia.com/gpu.sliced]`.
    pub fn field(&self) -> String {
        let list = if self.in_limits { "limits" } else { "requests" };
        format!(
            "{}[{}].resources.{list}[{}]",
            self.group.field(),
            self.index,
            self.key.name()
        )
    }

    /// The value when it is a whole number.
    pub fn whole(&self) -> Option<i64> {
        self.amount.and_then(Quantity::whole)
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Every accelerator key of every container, in the Pod's order (init containers first).
pub fn claims(spec: &PodSpec, bases: &[String]) -> Vec<Claim> {
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let group = if is_sidecar(c) {
                Group::Sidecar
            } else {
                Group::Init
            };
            (group, i, c)
        });
    let app = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (Group::App, i, c));
    let mut out = Vec::new();
    for (group, index, c) in init.chain(app) {
        let Some(res) = &c.resources else { continue };
        let limits = res.limits.as_ref();
        let requests = res.requests.as_ref();
        let names: BTreeSet<&String> = limits
            .into_iter()
            .flat_map(|m| m.keys())
            .chain(requests.into_iter().flat_map(|m| m.keys()))
            .collect();
        for name in names {
            let Some(key) = classify(name, bases) else {
                continue;
            };
            let (value, in_limits) = match limits.and_then(|m| m.get(name)) {
                Some(v) => (v.0.clone(), true),
                None => (
                    requests
                        .and_then(|m| m.get(name))
                        .map(|v| v.0.clone())
                        .unwrap_or_default(),
                    false,
                ),
            };
            out.push(Claim {
                group,
                index,
                container: c.name.clone(),
                amount: Quantity::parse(&value).ok(),
                value,
                key,
                in_limits,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn bases() -> Vec<String> {
        vec![
            "nvidia.com/gpu".into(),
            "amd.com/gpu".into(),
            "huawei.com/npu".into(),
        ]
    }

    #[test]
    fn keys_read_as_families() {
        let b = bases();
        let cases = [
            ("nvidia.com/gpu", Some((Family::Exclusive, Part::Head))),
            ("nvidia.com/gpu.shared", Some((Family::Shared, Part::Head))),
            ("nvidia.com/gpu.sliced", Some((Family::Sliced, Part::Head))),
            (
                "nvidia.com/gpu.sliced.memory-percentage",
                Some((Family::Sliced, Part::MemoryPercentage)),
            ),
            (
                "nvidia.com/gpu.sliced.memory-mib",
                Some((Family::Sliced, Part::MemoryMib)),
            ),
            (
                "nvidia.com/gpu.sliced.cores-percentage",
                Some((Family::Sliced, Part::CoresPercentage)),
            ),
            (
                "nvidia.com/gpu.sliced.units",
                Some((Family::Sliced, Part::Units)),
            ),
            (
                "nvidia.com/gpu.partitioned",
                Some((Family::Partitioned, Part::Head)),
            ),
            (
                "nvidia.com/gpu.partitioned.units",
                Some((Family::Partitioned, Part::Units)),
            ),
            (
                "nvidia.com/gpu.partitioned.mig-1g.10gb",
                Some((Family::Partitioned, Part::Profile("mig-1g.10gb".into()))),
            ),
            ("nvidia.com/gpu.partitioned.", None),
            ("nvidia.com/gpu.other", None),
            ("nvidia.com/gpus", None),
            ("device.gpustack.ai/nvidia.visibility", None),
            ("cpu", None),
        ];
        for (name, want) in cases {
            let got = classify(name, &b).map(|k| (k.family, k.part.clone()));
            assert_eq!(got, want, "{name}");
            if let Some(k) = classify(name, &b) {
                assert_eq!(k.name(), name, "round trip");
            }
        }
    }

    #[test]
    fn claims_keep_their_container_group() {
        let spec: PodSpec = serde_json::from_value(json!({
            "initContainers": [
                {"name": "fetch", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"amd.com/gpu.shared": "2"}}},
            ],
            "containers": [
                {"name": "app", "resources": {
                    "limits": {"nvidia.com/gpu.sliced": "1", "cpu": "1"},
                    "requests": {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-mib": "1024"},
                }},
                {"name": "plain"},
            ],
        }))
        .unwrap();
        let got: Vec<(Group, usize, String, String)> = claims(&spec, &bases())
            .into_iter()
            .map(|c| (c.group, c.index, c.key.name(), c.field()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Group::Init,
                    0,
                    "nvidia.com/gpu".into(),
                    "spec.initContainers[0].resources.limits[nvidia.com/gpu]".into()
                ),
                (
                    Group::Sidecar,
                    1,
                    "amd.com/gpu.shared".into(),
                    "spec.initContainers[1].resources.requests[amd.com/gpu.shared]".into()
                ),
                (
                    Group::App,
                    0,
                    "nvidia.com/gpu.sliced".into(),
                    "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]".into()
                ),
                (
                    Group::App,
                    0,
                    "nvidia.com/gpu.sliced.memory-mib".into(),
                    "spec.containers[0].resources.requests[nvidia.com/gpu.sliced.memory-mib]"
                        .into()
                ),
            ]
        );
    }
}
