//! Leader election on a `coordination.k8s.io/v1` Lease. Every replica serves the API; only the
//! holder of the Lease reconciles. The decision is a pure function of the Lease and the clock;
//! the loop around it renews while leading and reports the moment leadership is lost, so the
//! controllers can be stopped at once.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;

/// Where the Lease is and how it is kept.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// Who this replica is (unique per process).
    pub identity: String,
    /// How long a Lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps failing to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often candidates try and the leader renews.
    pub retry_period: Duration,
}

/// What to do with the Lease as it was read.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// We hold it: renew.
    Renew,
    /// Nobody holds it (or the holder let it expire): take it.
    Take {
        /// The Lease's `leaseTransitions` after taking it.
        transitions: i32,
    },
    /// Someone else holds it.
    Wait,
}

/// The decision for `lease` (absent: nobody ever held it) at `now`.
pub fn decide(lease: Option<&LeaseSpec>, identity: &str, now: jiff::Timestamp) -> Decision {
    let Some(spec) = lease else {
        return Decision::Take { transitions: 0 };
    };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    let transitions = spec.lease_transitions.unwrap_or(0);
    if holder == identity {
        return Decision::Renew;
    }
    let expires = spec.renew_time.as_ref().map(|t| t.0).and_then(|t| {
        let secs = i64::from(spec.lease_duration_seconds.unwrap_or(0));
        t.checked_add(jiff::SignedDuration::from_secs(secs)).ok()
    });
    match expires {
        Some(e) if !holder.is_empty() && e > now => Decision::Wait,
        _ => Decision::Take {
            transitions: transitions + 1,
        },
    }
}

/// Reading or writing the Lease failed.
#[derive(Debug, thiserror::Error)]
#[error("lease {namespace}/{name}: {source}")]
pub struct LeaseError {
    namespace: String,
    name: String,
    #[source]
    source: kube::Error,
}

/// One round: reads the Lease and takes or renews it. Returns whether we hold it now. A write
/// that loses a race (409) is "not leading", not an error.
pub async fn try_acquire_or_renew(api: &Api<Lease>, cfg: &LeaseConfig) -> Result<bool, LeaseError> {
    let err = |source| LeaseError {
        namespace: cfg.namespace.clone(),
        name: cfg.name.clone(),
        source,
    };
    let current = api.get_opt(&cfg.name).await.map_err(err)?;
    let now = jiff::Timestamp::now();
    let decision = decide(
        current.as_ref().and_then(|l| l.spec.as_ref()),
        &cfg.identity,
        now,
    );
    let mut spec = current
        .as_ref()
        .and_then(|l| l.spec.clone())
        .unwrap_or_default();
    match decision {
        Decision::Wait => return Ok(false),
        Decision::Renew => spec.renew_time = Some(MicroTime(now)),
        Decision::Take { transitions } => {
            spec = LeaseSpec {
                holder_identity: Some(cfg.identity.clone()),
                lease_duration_seconds: Some(cfg.lease_duration.as_secs().max(1) as i32),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            };
        }
    }
    let result = match current {
        Some(mut lease) => {
            lease.spec = Some(spec);
            // The read resourceVersion makes this a compare-and-swap.
            api.replace(&cfg.name, &PostParams::default(), &lease).await
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await
        }
    };
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(err(e)),
    }
}

/// Keeps `leading` true exactly while this replica holds the Lease, until `stop`.
pub async fn run(
    client: kube::Client,
    cfg: LeaseConfig,
    leading: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        let held = match try_acquire_or_renew(&api, &cfg).await {
            Ok(held) => {
                if held {
                    last_renewed = tokio::time::Instant::now();
                }
                held
            }
            Err(e) => {
                tracing::warn!("leader election: {e}");
                // A leader that cannot reach the cluster keeps leading until its deadline,
                // counted from its last successful renewal (not from the failed tries).
                *leading.borrow() && last_renewed.elapsed() < cfg.renew_deadline
            }
        };
        if leading.send_if_modified(|l| std::mem::replace(l, held) != held) {
            if held {
                tracing::info!(identity = %cfg.identity, lease = %cfg.name, "leading: controllers start");
            } else {
                tracing::warn!(identity = %cfg.identity, lease = %cfg.name, "not leading: controllers stop");
            }
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            _ = tokio::time::sleep(cfg.retry_period) => {}
        }
    }
    // Hand the Lease over at once on a clean stop, so the next leader need not wait it out.
    if *leading.borrow()
        && let Ok(Some(mut lease)) = api.get_opt(&cfg.name).await
        && let Some(spec) = lease.spec.as_mut()
        && spec.holder_identity.as_deref() == Some(&cfg.identity)
    {
        spec.holder_identity = None;
        spec.renew_time = None;
        let _ = api.replace(&cfg.name, &PostParams::default(), &lease).await;
    }
    let _ = leading.send(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, renewed_secs_ago: i64, duration: i32) -> LeaseSpec {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(
                now - jiff::SignedDuration::from_secs(renewed_secs_ago),
            )),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        assert_eq!(decide(None, "me", now), Decision::Take { transitions: 0 });
        assert_eq!(decide(Some(&spec("me", 5, 15)), "me", now), Decision::Renew);
        assert_eq!(
            decide(Some(&spec("other", 5, 15)), "me", now),
            Decision::Wait
        );
        assert_eq!(
            decide(Some(&spec("other", 20, 15)), "me", now),
            Decision::Take { transitions: 4 }
        );
        assert_eq!(
            decide(Some(&spec("", 1, 15)), "me", now),
            Decision::Take { transitions: 4 }
        );
    }
}
