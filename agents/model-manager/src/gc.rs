//! Garbage collection and watermark decisions, as pure functions over what the caller measured.
//!
//! Usage comes from statfs as `(blocks − bavail)·bsize`, so root-reserved blocks count as used.
//! When `used + incoming` is above the high watermark, unreferenced, idle, unpinned trees that
//! are not downloading go, least recently used first, until `used + incoming` is at or below the
//! low watermark. What a Pod has mounted is never a candidate.

use std::time::Duration;

use gpustack_serving::backoff::Backoff;
use jiff::{SignedDuration, Timestamp};

/// A published tree as GC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The tree's manifest digest, as hex (its directory name).
    pub hex: String,
    /// Bytes of the tree's files.
    pub size_bytes: u64,
    /// `lastUsed`, or `publishedTime` when never used.
    pub last_used: Timestamp,
    /// A volume ref (a mounted target) points at it: never removed.
    pub referenced: bool,
    /// An attempt for the same digest runs.
    pub downloading: bool,
    /// Listed in `NodeModelStore.spec.pinned`: never removed.
    pub pinned: bool,
}

/// The cache filesystem's size and use, in bytes (from statfs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The filesystem's size.
    pub total_bytes: u64,
    /// `(blocks − bavail)·bsize`: root-reserved blocks count as used.
    pub used_bytes: u64,
}

/// Collection's thresholds, percent of the cache filesystem (`NodeModelStore.spec.watermarks`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermarks {
    /// Above this (with the incoming download), collection starts.
    pub high_percent: u32,
    /// Collection removes trees until use is at or below this.
    pub low_percent: u32,
}

/// Trees idle for less than this are kept even when unreferenced (a Pod may be about to mount).
pub(crate) const MIN_IDLE: SignedDuration = SignedDuration::from_mins(10);

/// What one collection pass removes, and whether that is enough.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Hex digests to remove, in order.
    pub remove: Vec<String>,
    /// Sum of the removed trees' sizes, in bytes.
    pub freed_bytes: u64,
    /// `used + incoming` still above high after removing: the download does not fit.
    pub over_high: bool,
    /// Above high with nothing (more) removable: `CapacityLow=True`.
    pub capacity_low: bool,
}

fn percent_of(total: u64, percent: u32) -> u64 {
    (u128::from(total) * u128::from(percent) / 100) as u64
}

/// What to remove so that `incoming` more bytes fit under the high watermark.
pub(crate) fn plan(
    usage: &Usage,
    incoming: u64,
    marks: &Watermarks,
    candidates: &[Candidate],
    now: Timestamp,
) -> Plan {
    let high = percent_of(usage.total_bytes, marks.high_percent);
    let low = percent_of(usage.total_bytes, marks.low_percent);
    let mut need = usage.used_bytes.saturating_add(incoming);
    let mut remove = Vec::new();
    let mut freed = 0u64;
    if need > high {
        let mut removable: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| !c.referenced && !c.downloading && !c.pinned)
            .filter(|c| now.duration_since(c.last_used) >= MIN_IDLE)
            .collect();
        removable.sort_by(|a, b| a.last_used.cmp(&b.last_used).then(a.hex.cmp(&b.hex)));
        for c in removable {
            if need <= low {
                break;
            }
            remove.push(c.hex.clone());
            freed += c.size_bytes;
            need = need.saturating_sub(c.size_bytes);
        }
    }
    let over_high = need > high;
    Plan {
        remove,
        freed_bytes: freed,
        over_high,
        capacity_low: over_high,
    }
}

/// Whether a reservation fits: used + (size − written) + what other reservations still have to
/// write must stay at or below the high watermark.
pub(crate) fn reservation_fits(
    usage: &Usage,
    remaining: u64,
    others_unwritten: u64,
    marks: &Watermarks,
) -> bool {
    let high = percent_of(usage.total_bytes, marks.high_percent);
    usage
        .used_bytes
        .saturating_add(remaining)
        .saturating_add(others_unwritten)
        <= high
}

/// `usedPercent` in status: rounded to the nearest multiple of 5 so that status does not churn.
pub(crate) fn used_percent(usage: &Usage) -> u32 {
    if usage.total_bytes == 0 {
        return 0;
    }
    let exact = u128::from(usage.used_bytes) * 100 / u128::from(usage.total_bytes);
    let rounded = (exact + 2) / 5 * 5;
    rounded.min(100) as u32
}

/// Partials whose newest file is older than this, and that no attempt uses, are removed.
pub(crate) const STALE_PARTIAL: SignedDuration = SignedDuration::from_hours(24);

pub(crate) fn partial_is_stale(newest_mtime: Timestamp, in_use: bool, now: Timestamp) -> bool {
    !in_use && now.duration_since(newest_mtime) > STALE_PARTIAL
}

/// A record of a digest no longer on disk is dropped a day after it was last written, retried
/// or used (`last`, the latest of those).
pub(crate) fn record_is_stale(last: Timestamp, now: Timestamp) -> bool {
    now.duration_since(last) > STALE_PARTIAL
}

/// The kubelet's eviction and image GC thresholds, as `NodeModelStore.spec.kubelet` carries
/// them (`"10%"` or a quantity such as `"5Gi"`; empty means the kubelet's default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KubeletThresholds<'a> {
    /// `evictionHard` `nodefs.available` (`"10%"` or a quantity).
    pub nodefs_available: &'a str,
    /// `evictionHard` `imagefs.available`.
    pub imagefs_available: &'a str,
    /// `imageGCHighThresholdPercent`.
    pub image_gc_high_percent: Option<u32>,
}

/// The kubelet's defaults: nodefs.available 10%, imagefs.available 15%, image GC high 85%.
const KUBELET_DEFAULTS: (u32, u32, u32) = (10, 15, 85);

/// A kubelet quantity in bytes (`5Gi`, `500M`, `1.5Gi`, `1000`); `None` when unreadable.
fn quantity_bytes(q: &str) -> Option<u64> {
    let q = q.trim();
    let units: [(&str, f64); 12] = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, scale) = units
        .iter()
        .find_map(|(u, f)| q.strip_suffix(u).map(|n| (n, *f)))
        .unwrap_or((q, 1.0));
    let n: f64 = number.parse().ok()?;
    (n.is_finite() && n >= 0.0).then(|| (n * scale).ceil() as u64)
}

/// A threshold as a percentage of a filesystem of `total` bytes, rounded up; a byte threshold
/// at or above the size is 100. `None` when unreadable.
fn threshold_percent(t: &str, total: u64) -> Option<u32> {
    if let Some(p) = t.trim().strip_suffix('%') {
        let p: f64 = p.trim().parse().ok()?;
        return (p.is_finite() && p >= 0.0).then(|| p.ceil().min(100.0) as u32);
    }
    let bytes = quantity_bytes(t)?;
    if total == 0 || bytes >= total {
        return Some(100);
    }
    Some((u128::from(bytes) * 100).div_ceil(u128::from(total)) as u32)
}

/// The highest the high watermark may be when the cache shares the kubelet's filesystem of
/// `total` bytes: 5 points under each kubelet threshold, and never below 2.
pub(crate) fn kubelet_cap(t: &KubeletThresholds<'_>, total: u64) -> u32 {
    let (nodefs, imagefs, gc) = KUBELET_DEFAULTS;
    let pct = |s: &str, default: u32| {
        if s.is_empty() {
            default
        } else {
            threshold_percent(s, total).unwrap_or(default)
        }
    };
    let nodefs = pct(t.nodefs_available, nodefs);
    let imagefs = pct(t.imagefs_available, imagefs);
    let gc = t.image_gc_high_percent.unwrap_or(gc);
    let caps = [
        100i64 - i64::from(nodefs) - 5,
        100 - i64::from(imagefs) - 5,
        i64::from(gc) - 5,
    ];
    caps.into_iter().min().unwrap_or(2).max(2) as u32
}

/// `marks` under `cap`: high at most `cap`, low below high. `None` when nothing changed.
pub(crate) fn capped(marks: &Watermarks, cap: u32) -> Option<Watermarks> {
    if marks.high_percent <= cap {
        return None;
    }
    Some(Watermarks {
        high_percent: cap,
        low_percent: marks.low_percent.min(cap.saturating_sub(1)).max(1),
    })
}

/// When a failed digest may be tried again: one minute doubled per failure, at most an hour.
const RETRY: Backoff = Backoff::new(Duration::from_secs(60), Duration::from_secs(3600));

/// How long after its `failures`th failure in a row a digest may be tried again ([`RETRY`]).
pub(crate) fn retry_after(failures: u32) -> SignedDuration {
    SignedDuration::try_from(RETRY.after_failures(u64::from(failures)))
        .unwrap_or(SignedDuration::from_hours(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn at(mins: i64) -> Timestamp {
        Timestamp::from_second(mins * 60).unwrap()
    }

    fn tree(hex: &str, gib: u64, last_used_min: i64) -> Candidate {
        Candidate {
            hex: hex.into(),
            size_bytes: gib * GIB,
            last_used: at(last_used_min),
            referenced: false,
            downloading: false,
            pinned: false,
        }
    }

    const MARKS: Watermarks = Watermarks {
        high_percent: 80,
        low_percent: 70,
    };

    #[test]
    fn plan_table() {
        let usage = |used| Usage {
            total_bytes: 100 * GIB,
            used_bytes: used * GIB,
        };
        let now = at(1000);
        struct Case {
            name: &'static str,
            used: u64,
            incoming: u64,
            candidates: Vec<Candidate>,
            remove: &'static [&'static str],
            over_high: bool,
        }
        let referenced = Candidate {
            referenced: true,
            ..tree("ref", 50, 0)
        };
        let pinned = Candidate {
            pinned: true,
            ..tree("pin", 50, 0)
        };
        let downloading = Candidate {
            downloading: true,
            ..tree("dl", 50, 0)
        };
        let cases = vec![
            Case {
                name: "under high: nothing goes",
                used: 79,
                incoming: 1,
                candidates: vec![tree("a", 10, 0)],
                remove: &[],
                over_high: false,
            },
            Case {
                name: "oldest first, down to low",
                used: 85,
                incoming: 0,
                candidates: vec![
                    tree("new", 10, 900),
                    tree("old", 10, 100),
                    tree("mid", 10, 500),
                ],
                remove: &["old", "mid"],
                over_high: false,
            },
            Case {
                name: "incoming counts",
                used: 70,
                incoming: 15,
                candidates: vec![tree("a", 10, 100), tree("b", 10, 200)],
                remove: &["a", "b"],
                over_high: false,
            },
            Case {
                name: "referenced, pinned, downloading and recently used are kept",
                used: 90,
                incoming: 0,
                candidates: vec![referenced, pinned, downloading, tree("fresh", 50, 995)],
                remove: &[],
                over_high: true,
            },
            Case {
                name: "not enough removable: still over high",
                used: 95,
                incoming: 0,
                candidates: vec![tree("a", 5, 0)],
                remove: &["a"],
                over_high: true,
            },
        ];
        for c in cases {
            let p = plan(&usage(c.used), c.incoming * GIB, &MARKS, &c.candidates, now);
            assert_eq!(p.remove, c.remove, "{}", c.name);
            assert_eq!(p.over_high, c.over_high, "{}", c.name);
            assert_eq!(p.capacity_low, c.over_high, "{}", c.name);
        }
    }

    #[test]
    fn reservations_and_percentages() {
        let u = Usage {
            total_bytes: 100,
            used_bytes: 50,
        };
        assert!(reservation_fits(&u, 20, 10, &MARKS));
        assert!(!reservation_fits(&u, 20, 11, &MARKS));
        for (used, want) in [(0, 0), (2, 0), (3, 5), (52, 50), (53, 55), (100, 100)] {
            let u = Usage {
                total_bytes: 100,
                used_bytes: used,
            };
            assert_eq!(used_percent(&u), want, "{used}");
        }
    }

    #[test]
    fn the_kubelet_thresholds_cap_the_high_watermark() {
        let t = |n: &'static str, i: &'static str, g: Option<u32>| KubeletThresholds {
            nodefs_available: n,
            imagefs_available: i,
            image_gc_high_percent: g,
        };
        let table = [
            (t("", "", None), 1000 * GIB, 80, "kubelet defaults give 80"),
            (t("20%", "", None), 1000 * GIB, 75, "nodefs 20% -> 75"),
            (t("", "", Some(70)), 1000 * GIB, 65, "image GC 70 -> 65"),
            (
                t("100Gi", "5%", Some(95)),
                1000 * GIB,
                85,
                "100Gi of 1000Gi: 10%",
            ),
            (
                t("101Gi", "5%", Some(95)),
                1000 * GIB,
                84,
                "rounded up to 11%",
            ),
            (
                t("2000Gi", "", None),
                1000 * GIB,
                2,
                "above the size floors at 2",
            ),
            (t("", "2Gi", None), 10 * GIB, 75, "imagefs 20% by bytes"),
            (
                t("nonsense", "", None),
                GIB,
                80,
                "unreadable means the default",
            ),
        ];
        for (th, total, want, name) in table {
            assert_eq!(kubelet_cap(&th, total), want, "{name}");
        }
        let marks = Watermarks {
            high_percent: 90,
            low_percent: 85,
        };
        assert_eq!(
            capped(&marks, 80),
            Some(Watermarks {
                high_percent: 80,
                low_percent: 79
            })
        );
        assert_eq!(capped(&MARKS, 80), None, "already under the cap");
    }

    #[test]
    fn backoff_and_staleness() {
        let mins = |d: SignedDuration| d.as_secs() / 60;
        assert_eq!(mins(retry_after(1)), 1);
        assert_eq!(mins(retry_after(2)), 2);
        assert_eq!(mins(retry_after(6)), 32);
        assert_eq!(mins(retry_after(7)), 60);
        assert_eq!(mins(retry_after(40)), 60);
        let now = at(48 * 60);
        assert!(partial_is_stale(at(0), false, now));
        assert!(!partial_is_stale(at(0), true, now));
        assert!(!partial_is_stale(at(47 * 60), false, now));
        assert!(record_is_stale(at(23 * 60), now));
        assert!(!record_is_stale(at(24 * 60), now), "exactly a day is kept");
    }
}
