//! `NodeModelStore.status`, rebuilt from what is on disk (published trees, the ledger, refs) and
//! the running downloads, never from memory of past events; and the rule that decides when a
//! rebuilt status is worth a write. No tenant name ever appears here.

use gpustack_api::model_store::{
    ModelSource, ModelState, NodeModelStoreStatus, StoreCapacity, StoredModel,
};
use jiff::{Timestamp, tz::TimeZone};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::{
    gc::{self, Usage},
    manifest::ManifestDigest,
    materializer::JobView,
    store::{DigestRecord, Marker, VolumeRef},
};

pub const MAX_MODELS: usize = 256;

/// Everything one status pass looks at.
pub struct Observed<'a> {
    pub generation: Option<i64>,
    pub usage: Option<Usage>,
    pub published: &'a [(ManifestDigest, Marker)],
    pub records: &'a [(ManifestDigest, DigestRecord)],
    pub refs: &'a [VolumeRef],
    pub jobs: &'a [JobView],
    /// The spec's validation error, if any.
    pub invalid_spec: Option<String>,
    /// Said in the Ready message when serving (e.g. the kubelet's cap on the watermarks).
    pub ready_note: Option<String>,
    pub capacity_low: bool,
    pub now: Timestamp,
}

fn hour(t: Timestamp) -> Time {
    let z = t.to_zoned(TimeZone::UTC);
    let floored = z
        .with()
        .minute(0)
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .map(|z| z.timestamp())
        .unwrap_or(t);
    Time(floored)
}

fn condition(
    prev: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Condition {
    let status = if status { "True" } else { "False" }.to_owned();
    let since = prev
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    Condition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message,
        last_transition_time: since,
        observed_generation: None,
    }
}

/// The status this node should show now; `previous` keeps transition times stable.
pub fn build(o: &Observed<'_>, previous: &NodeModelStoreStatus) -> NodeModelStoreStatus {
    let mut models: Vec<(bool, Option<Timestamp>, StoredModel)> = Vec::new();
    let record_of = |d: &ManifestDigest| o.records.iter().find(|(r, _)| r == d).map(|(_, r)| r);
    let referenced = |d: &ManifestDigest| o.refs.iter().any(|r| r.hex == d.hex());
    for (d, marker) in o.published {
        let used = record_of(d)
            .and_then(|r| r.last_used_time)
            .unwrap_or(marker.published_time);
        models.push((
            referenced(d),
            Some(used),
            StoredModel {
                digest: d.to_string(),
                state: ModelState::Ready,
                size_bytes: Some(marker.size_bytes),
                downloaded_bytes: None,
                source: Some(ModelSource::Hub),
                referenced: referenced(d),
                last_used_time: Some(hour(used)),
                reason: String::new(),
                message: String::new(),
                retry_time: None,
            },
        ));
    }
    for j in o.jobs {
        if o.published.iter().any(|(d, _)| d == &j.digest) {
            continue;
        }
        models.push((
            referenced(&j.digest),
            Some(o.now),
            StoredModel {
                digest: j.digest.to_string(),
                state: ModelState::Downloading,
                size_bytes: j.size_bytes,
                downloaded_bytes: Some(j.downloaded_bytes),
                source: Some(ModelSource::Hub),
                referenced: referenced(&j.digest),
                last_used_time: None,
                reason: String::new(),
                message: String::new(),
                retry_time: None,
            },
        ));
    }
    for (d, r) in o.records {
        let shown =
            o.published.iter().any(|(p, _)| p == d) || o.jobs.iter().any(|j| &j.digest == d);
        if shown || r.reason.is_empty() || r.reason == "Canceled" {
            continue;
        }
        models.push((
            referenced(d),
            r.last_used_time,
            StoredModel {
                digest: d.to_string(),
                state: ModelState::Failed,
                size_bytes: None,
                downloaded_bytes: None,
                source: None,
                referenced: referenced(d),
                last_used_time: r.last_used_time.map(hour),
                reason: r.reason.clone(),
                message: r.message.clone(),
                retry_time: r.retry_time.map(Time),
            },
        ));
    }
    // Referenced first, then most recently used, then by digest for a stable order.
    models.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(b.1.cmp(&a.1))
            .then(a.2.digest.cmp(&b.2.digest))
    });
    let overflow = models.len().saturating_sub(MAX_MODELS);
    let models: Vec<StoredModel> = models.into_iter().take(MAX_MODELS).map(|m| m.2).collect();

    let stored: u64 = o.published.iter().map(|(_, m)| m.size_bytes).sum();
    let capacity = o.usage.as_ref().map(|u| StoreCapacity {
        total_bytes: u.total_bytes,
        stored_bytes: stored,
        used_percent: gc::used_percent(u),
    });
    let prev = &previous.conditions;
    let ready = match &o.invalid_spec {
        Some(why) => condition(
            prev,
            "Ready",
            false,
            "InvalidConfiguration",
            format!("{why}; downloads and collection skipped"),
            o.now,
        ),
        None => {
            let mut msg = format!("serving {} models", models.len());
            if overflow > 0 {
                msg.push_str(&format!("; {overflow} more not listed"));
            }
            if let Some(note) = &o.ready_note {
                msg.push_str("; ");
                msg.push_str(note);
            }
            condition(prev, "Ready", true, "Serving", msg, o.now)
        }
    };
    let capacity_low = if o.capacity_low {
        condition(
            prev,
            "CapacityLow",
            true,
            "NothingToRemove",
            "usage is above the high watermark and nothing can be removed".into(),
            o.now,
        )
    } else {
        condition(
            prev,
            "CapacityLow",
            false,
            "WithinWatermarks",
            String::new(),
            o.now,
        )
    };
    NodeModelStoreStatus {
        observed_generation: o.generation,
        capacity,
        models,
        conditions: vec![ready, capacity_low],
    }
}

/// Whether `next` is worth writing over `current`. Progress alone (downloaded bytes) is written
/// at most every 30 s and only when some download moved by 5% of its size; anything else at once.
pub fn should_write(
    current: &NodeModelStoreStatus,
    next: &NodeModelStoreStatus,
    last_write: Timestamp,
    now: Timestamp,
) -> bool {
    if current == next {
        return false;
    }
    let without_progress = |s: &NodeModelStoreStatus| {
        let mut s = s.clone();
        for m in &mut s.models {
            m.downloaded_bytes = None;
        }
        s
    };
    if without_progress(current) != without_progress(next) {
        return true;
    }
    let moved_enough = next.models.iter().any(|n| {
        let before = current
            .models
            .iter()
            .find(|c| c.digest == n.digest)
            .and_then(|c| c.downloaded_bytes)
            .unwrap_or(0);
        let (Some(after), Some(size)) = (n.downloaded_bytes, n.size_bytes) else {
            return false;
        };
        size > 0 && after.abs_diff(before) * 20 >= size
    });
    moved_enough && now.duration_since(last_write) >= jiff::SignedDuration::from_secs(30)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(c: char) -> ManifestDigest {
        ManifestDigest::from_hex(&c.to_string().repeat(64)).unwrap()
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn marker(digest: &ManifestDigest, t: i64) -> Marker {
        Marker {
            digest: digest.to_string(),
            attempt: 1,
            manifest_format: "gpustack-manifest v1".into(),
            size_bytes: 100,
            file_count: 1,
            published_time: at(t),
            source: "Hub".into(),
        }
    }

    #[test]
    fn builds_models_conditions_and_capacity() {
        let published = vec![
            (d('a'), marker(&d('a'), 7_200)),
            (d('b'), marker(&d('b'), 3_600)),
        ];
        let records = vec![
            (
                d('c'),
                DigestRecord {
                    reason: "AccessDenied".into(),
                    message: "HTTP 401".into(),
                    failures: 1,
                    retry_time: Some(at(9_000)),
                    ..Default::default()
                },
            ),
            (
                d('e'),
                DigestRecord {
                    reason: "Canceled".into(),
                    ..Default::default()
                },
            ),
        ];
        let refs = vec![VolumeRef {
            volume_id: "csi-1".into(),
            target_path: "/t".into(),
            hex: d('b').hex().into(),
            pod_namespace: "tenant-secret-name".into(),
            pod_name: "p".into(),
            pod_uid: "u".into(),
        }];
        let jobs = vec![JobView {
            digest: d('f'),
            size_bytes: Some(1000),
            downloaded_bytes: 10,
        }];
        let o = Observed {
            generation: Some(3),
            usage: Some(Usage {
                total_bytes: 1000,
                used_bytes: 420,
            }),
            published: &published,
            records: &records,
            refs: &refs,
            jobs: &jobs,
            invalid_spec: None,
            ready_note: None,
            capacity_low: false,
            now: at(10_000),
        };
        let s = build(&o, &NodeModelStoreStatus::default());
        let order: Vec<_> = s
            .models
            .iter()
            .map(|m| (m.digest.chars().nth(7).unwrap(), m.state))
            .collect();
        assert_eq!(
            order,
            [
                ('b', ModelState::Ready),
                ('f', ModelState::Downloading),
                ('a', ModelState::Ready),
                ('c', ModelState::Failed)
            ],
            "referenced first, then by last use; Canceled hidden"
        );
        assert_eq!(
            s.capacity,
            Some(StoreCapacity {
                total_bytes: 1000,
                stored_bytes: 200,
                used_percent: 40
            })
        );
        assert_eq!(s.conditions[0].reason, "Serving");
        assert_eq!(s.conditions[1].reason, "WithinWatermarks");
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            !text.contains("tenant-secret-name"),
            "no tenant names in status"
        );
        // lastUsedTime is floored to the hour.
        assert_eq!(s.models[2].last_used_time, Some(Time(at(7_200))));

        let invalid = Observed {
            invalid_spec: Some("spec.download.concurrency 0 is outside 1..=64".into()),
            capacity_low: true,
            ..o
        };
        let s2 = build(&invalid, &s);
        assert_eq!(
            (
                s2.conditions[0].status.as_str(),
                s2.conditions[0].reason.as_str()
            ),
            ("False", "InvalidConfiguration")
        );
        assert!(s2.conditions[0].message.contains("concurrency"));
        assert_eq!(s2.conditions[1].reason, "NothingToRemove");
    }

    #[test]
    fn progress_alone_is_thresholded() {
        let with = |downloaded: u64, state: ModelState| NodeModelStoreStatus {
            models: vec![StoredModel {
                digest: "sha256:x".into(),
                state,
                size_bytes: Some(1000),
                downloaded_bytes: Some(downloaded),
                source: None,
                referenced: false,
                last_used_time: None,
                reason: String::new(),
                message: String::new(),
                retry_time: None,
            }],
            ..Default::default()
        };
        let base = with(100, ModelState::Downloading);
        let table = [
            (with(100, ModelState::Downloading), 60, false, "unchanged"),
            (
                with(140, ModelState::Downloading),
                60,
                false,
                "moved under 5%",
            ),
            (with(150, ModelState::Downloading), 10, false, "too soon"),
            (
                with(150, ModelState::Downloading),
                30,
                true,
                "5% after 30 s",
            ),
            (
                with(100, ModelState::Ready),
                1,
                true,
                "a state change is written at once",
            ),
        ];
        for (next, secs, want, name) in table {
            assert_eq!(should_write(&base, &next, at(0), at(secs)), want, "{name}");
        }
    }
}
