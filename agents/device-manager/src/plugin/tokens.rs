//! The device IDs each plugin advertises (devices.md §4) and their health and NUMA topology.
//!
//! ID = `<groupId>:<acceleratorId>:<index, 4-digit zero padded>`. Exclusive: one per card;
//! shared: ten per card, indexes stepping by a tenth of the card's units; sliced: the card's
//! logical slice count; partitioned: the card's partition count; visibility: 512 per
//! manufacturer, not bound to a card.

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AllocationMode, DevicesGroup, UNITS_PER_ACCELERATOR},
};

use crate::ledger::Ledger;

/// Tokens per card in shared mode (a request for N is N distinct cards).
pub const SHARED_TOKENS: u32 = 10;
/// Visibility tokens per manufacturer.
pub const VISIBILITY_TOKENS: u32 = 512;

/// One advertised device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    /// The card it is bound to (none for visibility).
    pub accelerator: Option<String>,
    pub healthy: bool,
    /// NUMA node, where the mode reports topology.
    pub numa: Option<i64>,
}

/// A device ID taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenId<'a> {
    pub group: &'a str,
    pub accelerator: &'a str,
    pub index: u32,
}

pub fn device_id(group: &str, accelerator: &str, index: u64) -> String {
    format!("{group}:{accelerator}:{index:04}")
}

/// Splits `<group>:<accelerator>:<index>`; the group id never holds a colon, the accelerator
/// id might.
pub fn parse(id: &str) -> Option<TokenId<'_>> {
    let (group, rest) = id.split_once(':')?;
    let (accelerator, index) = rest.rsplit_once(':')?;
    Some(TokenId {
        group,
        accelerator,
        index: index.parse().ok()?,
    })
}

/// Whether a card offers `mode` at all: a card in partition mode offers only partitions, one
/// out of it everything else but partitions.
pub fn offers(accelerator: &Accelerator, mode: AllocationMode) -> bool {
    let partitioned = accelerator.status.physical_sliced.is_some();
    match mode {
        AllocationMode::Partitioned => partitioned,
        AllocationMode::Exclusive | AllocationMode::Shared => !partitioned,
        AllocationMode::Sliced => {
            !partitioned
                && accelerator
                    .status
                    .logical_sliced
                    .as_ref()
                    .is_some_and(|l| l.count > 0)
        }
        AllocationMode::Visibility | AllocationMode::None => false,
    }
}

fn numa(accelerator: &Accelerator) -> i64 {
    accelerator
        .topology
        .numa_affinity
        .trim()
        .parse()
        .unwrap_or(0)
        .max(0)
}

/// Every token of `manufacturer`'s plugin in `mode`, in spec order. A token is unhealthy when
/// its card is, or when the ledger has the card held in another mode.
pub fn tokens(
    groups: &[DevicesGroup],
    manufacturer: Manufacturer,
    mode: AllocationMode,
    ledger: &Ledger,
) -> Vec<Token> {
    if mode == AllocationMode::Visibility {
        return (0..VISIBILITY_TOKENS)
            .map(|i| Token {
                id: device_id(manufacturer.as_str(), "visibility", u64::from(i)),
                accelerator: None,
                healthy: true,
                numa: None,
            })
            .collect();
    }
    let mut out = Vec::new();
    for group in groups.iter().filter(|g| g.manufacturer == manufacturer) {
        let mut cards: Vec<&Accelerator> = group.accelerators.iter().collect();
        cards.sort_by_key(|a| a.index);
        for card in cards.into_iter().filter(|a| offers(a, mode)) {
            let held_elsewhere = ledger
                .accelerator(manufacturer, &card.id)
                .is_some_and(|e| e.mode != AllocationMode::None && e.mode != mode);
            let healthy = !card.status.unhealthy && !held_elsewhere;
            let indexes: Vec<u64> = match mode {
                AllocationMode::Exclusive => vec![0],
                AllocationMode::Shared => (0..u64::from(SHARED_TOKENS))
                    .map(|i| i * (UNITS_PER_ACCELERATOR / u64::from(SHARED_TOKENS)))
                    .collect(),
                AllocationMode::Sliced => {
                    let n = card.status.logical_sliced.as_ref().map_or(0, |l| l.count);
                    (0..u64::try_from(n).unwrap_or(0)).collect()
                }
                AllocationMode::Partitioned => {
                    let n = card.status.physical_sliced.as_ref().map_or(0, |p| p.count);
                    (0..u64::try_from(n).unwrap_or(0)).collect()
                }
                _ => Vec::new(),
            };
            let numa = (mode != AllocationMode::Partitioned).then(|| numa(card));
            out.extend(indexes.into_iter().map(|i| Token {
                id: device_id(&group.id, &card.id, i),
                accelerator: Some(card.id.clone()),
                healthy,
                numa,
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use gpustack_api::devices::{
        AcceleratorAllocation, DevicesStatus, DevicesStatusGroup, LogicalSliced, PhysicalSliced,
    };

    use super::*;

    fn groups() -> Vec<DevicesGroup> {
        let mut a = Accelerator {
            id: "GPU-a".into(),
            index: 0,
            ..Accelerator::default()
        };
        a.topology.numa_affinity = "1".into();
        a.status.logical_sliced = Some(LogicalSliced {
            cores_percentage_overcommit: true,
            count: 3,
        });
        let mut m = Accelerator {
            id: "GPU-m".into(),
            index: 1,
            ..Accelerator::default()
        };
        m.status.physical_sliced = Some(PhysicalSliced {
            profiles: vec![],
            count: 2,
        });
        vec![DevicesGroup {
            accelerators: vec![m, a],
            ..DevicesGroup::new(Manufacturer::Nvidia, "h100", "H100", 1)
        }]
    }

    fn ids(t: &[Token]) -> Vec<&str> {
        t.iter().map(|t| t.id.as_str()).collect()
    }

    #[test]
    fn ids_per_mode() {
        let g = groups();
        let l = Ledger::default();
        let t = |mode| tokens(&g, Manufacturer::Nvidia, mode, &l);
        assert_eq!(ids(&t(AllocationMode::Exclusive)), ["h100:GPU-a:0000"]);
        let shared = t(AllocationMode::Shared);
        assert_eq!(shared.len(), 10);
        assert_eq!(shared[1].id, "h100:GPU-a:160000");
        assert_eq!(
            ids(&t(AllocationMode::Sliced)),
            ["h100:GPU-a:0000", "h100:GPU-a:0001", "h100:GPU-a:0002"]
        );
        let parts = t(AllocationMode::Partitioned);
        assert_eq!(ids(&parts), ["h100:GPU-m:0000", "h100:GPU-m:0001"]);
        assert_eq!(parts[0].numa, None);
        assert_eq!(t(AllocationMode::Exclusive)[0].numa, Some(1));
        let vis = t(AllocationMode::Visibility);
        assert_eq!(vis.len(), 512);
        assert_eq!(vis[511].id, "nvidia:visibility:0511");
    }

    #[test]
    fn health_follows_the_card_and_the_ledger() {
        let mut g = groups();
        let l = Ledger {
            status: DevicesStatus {
                groups: vec![DevicesStatusGroup {
                    id: "h100".into(),
                    manufacturer: Manufacturer::Nvidia,
                    accelerators: vec![AcceleratorAllocation {
                        id: "GPU-a".into(),
                        mode: AllocationMode::Sliced,
                        ..AcceleratorAllocation::default()
                    }],
                }],
            },
            ..Ledger::default()
        };
        assert!(!tokens(&g, Manufacturer::Nvidia, AllocationMode::Exclusive, &l)[0].healthy);
        assert!(tokens(&g, Manufacturer::Nvidia, AllocationMode::Sliced, &l)[0].healthy);
        g[0].accelerators[1].status.unhealthy = true;
        assert!(!tokens(&g, Manufacturer::Nvidia, AllocationMode::Sliced, &l)[0].healthy);
    }

    #[test]
    fn parse_round_trips() {
        assert_eq!(
            parse("h100:GPU-a:0003"),
            Some(TokenId {
                group: "h100",
                accelerator: "GPU-a",
                index: 3
            })
        );
        assert_eq!(parse("h100:die:1:160000").unwrap().accelerator, "die:1");
        assert_eq!(parse("nonsense"), None);
        assert_eq!(parse("a:b:x"), None);
    }
}
