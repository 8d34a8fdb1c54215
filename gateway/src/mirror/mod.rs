//! Upstream mirrors: for each upstream cluster named in `--upstreams` or subscribed through
//! `POST /apis/workers` ([`subscriptions`]), a task that keeps a copy of its GPU-relevant
//! objects (see [`kinds::default_kinds`], plus any `gvk` asked for) in the store under
//! cluster = the upstream's name, written straight from kube-runtime watchers (no in-memory
//! reflector): list results are applied as mark-and-sweep, so objects gone upstream are
//! deleted when a list completes, and watch events are written as they come.
//!
//! The mirror of upstream `NAME` is served read-only at `/clusters/NAME/` by the same REST
//! layer as embedded clusters: get, list and watch work as there; writes answer 405.
//!
//! **Who may read a mirror.** Over HTTPS, a request needs the bearer token of the mirrored
//! cluster: the gateway keeps one reader token per mirrored cluster (its hash in the store,
//! like an embedded cluster's admin token) and writes it, with the server URL and CA, to
//! `<data-dir>/NAME.kubeconfig` (mode 0600), so anyone who may read that file may read the
//! mirror. Over the unix socket, the socket's file mode (0600, owner only) is the access
//! control and no token is asked for. `GET /apis/workers` (the upstreams' status) and
//! `/metrics` accept any served cluster's token; subscribing and unsubscribing need the
//! `--token-file` token (see [`crate::ops`]).
//!
//! Every upstream's objects are also served together in the read-only [`fleet`] view.
//!
//! Each mirror is one task ([`Mirror::run`]): a readiness check (connect, then discovery of each
//! kind, bounded by `--worker-readiness-check-timeout`, retried from 5 s doubling to 1 min); a
//! kind the upstream does not serve is reported in status and looked for again on the same
//! schedule (a CRD may be installed later), while the served kinds are mirrored. Then one
//! watcher per kind (with kube-runtime's default backoff) and a health probe
//! (`/version` every [`MirrorOptions::probe_interval`], within [`MirrorOptions::probe_timeout`]) that notices an upstream
//! that is down or frozen while its watches are silent. Each probe is a new connection, so a
//! serving certificate that no longer verifies (a new CA) shows at the next probe, and it
//! compares the upstream's clock with the hub's ([`clock`]). Whatever an upstream answers is
//! bounded in size ([`bounded`]), so that a misbehaving peer costs the hub a known amount of
//! memory. The upstream's CRD of each mirrored kind
//! is stored in the mirror too, so after a gateway restart the stored mirror is served at once,
//! before the upstreams are reached.
//!
//! Connection modes ([`ConnMode`], `--worker-conn-mode`): `loopback` reaches each upstream
//! through a kubeconfig (the entry's, or the gateway's default one); `gpustack-api` reaches an
//! upstream without a kubeconfig through the GPUStack server's per-cluster proxy
//! (`<scheme>://localhost:<port>/v2/clusters/<name>/proxy`) with the subscription's token,
//! which never reaches status, logs or metrics ([`redact`], and `Access`'s `Debug`).
//!
//! Replicas sharing a PostgreSQL database mirror each upstream on one replica at a time, under
//! a lease kept in the database ([`lease`], [`leased`]); every replica serves every mirror.
//!
//! A restarted gateway resumes each kind's watch from the upstream resourceVersion it had got
//! to ([`progress`]) and relists only when the upstream no longer has it; status keeps the last
//! sync time across restarts, so an unreachable upstream reads `Degraded` since then.

pub mod backoff;
pub mod bounded;
pub mod clock;
pub mod config;
pub mod failure;
mod identity;
pub use gpustack_apiserver::store::fleet;
pub mod kinds;
pub mod kubeconfig_policy;
pub mod lease;
mod leased;
mod probe;
pub mod progress;
mod read_ahead;
pub mod redact;
pub mod request;
mod run;
pub mod status;
pub mod subscriptions;

pub use config::{Access, ConnMode, Upstream, UpstreamsError};
pub use failure::MirrorError;
pub use failure::{FailurePhase, MirrorFailure};
pub use run::{Mirror, MirrorOptions, UPSTREAM_VERSION, connect, def_from_discovery};
pub use status::{Phase, StatusBoard};
pub use subscriptions::{Outcome, SubscribeError, Subscriptions};
