//! Why a mirror failed, typed by the phase that failed, so that status and `/metrics` can say
//! which part of mirroring is in trouble.

use kube::runtime::watcher;

use gpustack_apiserver::store::StoreError;
use kube::config::KubeconfigError;
use std::time::Duration;

/// Why an upstream could not be reached or checked.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// The kubeconfig could not be read.
    #[error("reading the kubeconfig: {0}")]
    Kubeconfig(#[from] KubeconfigError),
    /// The kubeconfig is one the gateway will not use.
    #[error("{0}")]
    KubeconfigRefused(#[from] super::kubeconfig_policy::KubeconfigRefused),
    /// The upstream's API refused or failed a request.
    #[error("{0}")]
    Kube(#[from] kube::Error),
    /// A client could not be built from the configuration.
    #[error("{0}")]
    Config(String),
    /// The readiness check did not finish in time.
    #[error("the readiness check timed out after {0:?}")]
    Timeout(Duration),
    /// The upstream's clock is too far from the hub's.
    #[error(
        "the upstream's clock is {off} {} the hub's (more than {tolerance} apart): its times and certificates cannot be read as the hub's",
        if *ahead { "ahead of" } else { "behind" }
    )]
    ClockSkew {
        /// How far apart the clocks are, for people.
        off: String,
        /// Whether the upstream's clock is ahead of the hub's.
        ahead: bool,
        /// The skew tolerated, for people.
        tolerance: String,
    },
}

/// `e` with its sources after it, each one the text so far does not already say: a failed
/// handshake reads `client error (Connect): invalid peer certificate: UnknownIssuer`, not just
/// `client error (Connect)`.
pub fn reason(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let said = s.to_string();
        if !out.contains(&said) {
            out.push_str(": ");
            out.push_str(&said);
        }
        source = s.source();
    }
    out
}

/// The part of mirroring that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailurePhase {
    /// Reaching the upstream and finding what it serves (readiness check, health probe).
    Discovery,
    /// Listing a kind.
    List,
    /// Watching a kind (or resuming a previous run's watch).
    Watch,
    /// Writing a change to the store.
    Write,
    /// Deleting what the upstream no longer has after a list.
    Sweep,
}

impl FailurePhase {
    /// Every phase, in the order a mirror goes through them.
    pub const ALL: [FailurePhase; 5] = [
        FailurePhase::Discovery,
        FailurePhase::List,
        FailurePhase::Watch,
        FailurePhase::Write,
        FailurePhase::Sweep,
    ];

    /// The label value (`phase="watch"`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePhase::Discovery => "discovery",
            FailurePhase::List => "list",
            FailurePhase::Watch => "watch",
            FailurePhase::Write => "write",
            FailurePhase::Sweep => "sweep",
        }
    }
}

/// Why a watch (or a resumed watch) stopped.
#[derive(Debug, thiserror::Error)]
pub enum WatchFailure {
    /// The watcher failed.
    #[error("{0}")]
    Watcher(watcher::Error),
    /// A request of a resumed watch failed.
    #[error("{0}")]
    Request(#[from] kube::Error),
    /// The upstream answered an `ERROR` event.
    #[error("{0}")]
    Upstream(String),
    /// The upstream no longer has the version a resumed watch asked for (410 Gone).
    #[error("the upstream no longer has version {0}")]
    Expired(String),
}

/// A mirror failure.
#[derive(Debug, thiserror::Error)]
pub enum MirrorFailure {
    /// The readiness check or discovery failed.
    #[error(transparent)]
    Discovery(#[from] MirrorError),
    /// Listing a kind failed.
    #[error("listing {kind}: {source}")]
    List {
        /// The kind (`plural.group`).
        kind: String,
        /// The list's error.
        source: watcher::Error,
    },
    /// Watching a kind failed.
    #[error("watching {kind}: {source}")]
    Watch {
        /// The kind (`plural.group`).
        kind: String,
        /// Why the watch stopped.
        source: WatchFailure,
    },
    /// Storing a change failed.
    #[error("storing the change to {name}: {source}")]
    Write {
        /// The object's name.
        name: String,
        /// The store's error.
        source: StoreError,
    },
    /// Removing what the upstream no longer has failed.
    #[error("deleting what the upstream no longer has: {0}")]
    Sweep(#[source] StoreError),
}

impl MirrorFailure {
    /// Whether the store failed to take a change (not the upstream): what the watch delivered
    /// is not all stored, so it must not read on past it.
    pub fn in_store(&self) -> bool {
        matches!(self, MirrorFailure::Write { .. } | MirrorFailure::Sweep(_))
    }

    /// The phase the failure belongs to, for status and metrics.
    pub fn phase(&self) -> FailurePhase {
        match self {
            MirrorFailure::Discovery(_) => FailurePhase::Discovery,
            MirrorFailure::List { .. } => FailurePhase::List,
            MirrorFailure::Watch { .. } => FailurePhase::Watch,
            MirrorFailure::Write { .. } => FailurePhase::Write,
            MirrorFailure::Sweep(_) => FailurePhase::Sweep,
        }
    }

    /// A failure of kube-runtime's watcher on `kind`: its initial list, or its watch.
    pub fn watcher(kind: &str, e: watcher::Error) -> Self {
        match e {
            watcher::Error::InitialListFailed(_) => MirrorFailure::List {
                kind: kind.to_owned(),
                source: e,
            },
            e => MirrorFailure::Watch {
                kind: kind.to_owned(),
                source: WatchFailure::Watcher(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_says_each_source_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {0}")]
        struct Repeats(#[source] Inner);
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Inner(#[source] std::io::Error);
        let io = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        assert_eq!(
            reason(&Repeats(Inner(io))),
            "outer: client error (Connect): invalid peer certificate: UnknownIssuer"
        );
    }

    #[test]
    fn each_failure_names_its_phase() {
        let store = || StoreError::Closed;
        let cases = [
            (
                MirrorFailure::Discovery(MirrorError::Timeout(std::time::Duration::from_secs(1))),
                "discovery",
            ),
            (
                MirrorFailure::watcher("pods", watcher::Error::NoResourceVersion),
                "watch",
            ),
            (
                MirrorFailure::Watch {
                    kind: "pods".into(),
                    source: WatchFailure::Upstream("gone".into()),
                },
                "watch",
            ),
            (
                MirrorFailure::Write {
                    name: "a".into(),
                    source: store(),
                },
                "write",
            ),
            (MirrorFailure::Sweep(store()), "sweep"),
        ];
        for (failure, phase) in cases {
            assert_eq!(failure.phase().as_str(), phase, "{failure}");
        }
    }
}
