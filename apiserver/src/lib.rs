//! The embedded API server: Kubernetes-compatible clusters hosted over a SQLite [`store`],
//! served over HTTPS (and plain HTTP on an owner-only unix socket) by [`server`], that kube-rs
//! and kubectl use unchanged with the admin kubeconfig it writes ([`kubeconfig`], [`tls`],
//! [`hosting`]). The hub (`gpustack-gateway`) builds on it: its mirrors of upstream clusters are
//! hosted here and served read-only by the same API, and its own endpoints are added to the
//! server's router ([`server::Extension`]). Nothing here depends on the hub.
//!
//! - [`store`]: objects keyed by (cluster, group, resource, namespace, name) as JSON, a
//!   cluster-wide monotonic resourceVersion, an event log for watch resumption with compaction,
//!   group commit (`synchronous=FULL`, WAL: a write is acknowledged once durable), and an
//!   in-process fan-out fed after commit; the mirrors' batched upserts and sweeps, and the
//!   fleet view read from its members' rows.
//! - [`api`]: discovery (legacy and aggregated v2), CRUD, merge / JSON / strategic-merge / apply
//!   patches (server-side apply with field ownership and conflicts), status subresources,
//!   generation, finalizers, owner-reference garbage collection (background, foreground,
//!   orphan), namespace lifecycle, CRDs that register kinds (validated, defaulted and pruned by
//!   their schemas, with printer columns), selectors, pagination at a consistent snapshot,
//!   watches with bookmarks and 410 Gone, `Table` and `PartialObjectMetadata` responses,
//!   OpenAPI v2 (JSON and gnostic protobuf) and v3 documents and `Status` errors.
//! - [`registry`]: the kinds each cluster serves; [`hosting`]: which clusters are served, with
//!   their tokens and kubeconfigs.
//!
//! Every write runs one fixed pipeline whatever its kind (create, update, patch, apply, delete
//! and the garbage collector, in `api::handlers`); what is special about a kind (a namespace's
//! lifecycle, a pod's phase, a Service's node ports, a Secret's `stringData`, a CRD's
//! registration, a CSR's requester, the stored form of `events.k8s.io` Events, a
//! ServiceAccount's token subresource) is its strategy's, one file per special kind under
//! `api/kinds/`, with hooks the pipelines call at fixed points. A kind's subresources are its
//! own too, next to it (`kinds/pod/{binding,eviction,ephemeral,log}.rs`,
//! `kinds/csr/approval.rs`, `kinds/node/kubelet_proxy.rs`, and `kinds/scale.rs` for every kind
//! that declares `scale`): the strategy names them, and they read and write their object through
//! the verbs the dispatcher lends them (`api::kinds::ObjectVerbs`), so the kinds never import
//! the verbs.
//!
//! The handlers' state is split by concern ([`api::ApiState`] composes the parts, each shared):
//! [`api::Core`] (store, registry, served clusters, options, the kinds kept between requests,
//! the collector), [`api::AuthState`] (tokens, open watches per caller),
//! [`api::AdmissionState`] (webhooks, room for validation rules) and the aggregator. Each
//! handler, layer and helper takes the parts it uses: reads the core, the pipeline's layers the
//! core and the callers' state, the write pipelines the core, admission and the aggregator.
//!
//! Admission webhooks are called on writes to embedded clusters ([`api::admission`]). Requests
//! pass the [`api::pipeline`]'s tower layers in order before the verbs: the cluster is found,
//! the caller authenticated (the admin token, ServiceAccount tokens from TokenRequest) and
//! authorized with RBAC ([`api::auth`]), and what APIServices with a service serve goes to
//! their backends, as kube-aggregator forwards it ([`api::aggregation`]).
//!
//! Not (yet) an API server in these respects: CRD validation has no CEL rules, server-side
//! apply guesses list shapes without schemas (custom kinds' lists are atomic, built-in kinds'
//! lists of objects keyed by their strategic-merge keys), no
//! client-certificate authentication and no OpenAPI from aggregated APIs, built-in kinds have
//! no real schemas (unknown fields in them are kept), and protobuf watches are refused (406).

#![warn(missing_docs)]

pub mod api;
pub mod hosting;
pub mod kubeconfig;
pub mod registry;
pub mod server;
pub mod store;
pub mod tls;
