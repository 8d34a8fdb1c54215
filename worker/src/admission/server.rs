//! Serving the webhooks on the worker's HTTPS port: an `AdmissionReview` v1 in, the rules
//! applied, the review answered (a JSON patch for mutations, a `Status` for refusals). Every
//! answer is counted under its reason. Reviews are taken only from the API server (or a caller
//! the cluster allows to send them), and a review never writes: the webhooks declare no side
//! effects, so a refusal reaches its client in the `Status` and the metrics, not as an Event.
//!
//! What the rules need from the cluster is read at the edge: the InstanceTypes from a
//! reflector (with a direct read when the cache does not know the queue yet, so that a Pod
//! created right after its InstanceType is not refused), the Settings from a watch, the Pod
//! behind a model-manager's token on demand.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use axum::{
    Extension, Router,
    body::Bytes,
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use futures::StreamExt;
use gpustack_api::{instance_type::InstanceType, kueue::LocalQueue};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::ListParams,
    core::{
        DynamicObject,
        admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation},
    },
    runtime::{
        WatchStreamExt,
        reflector::{self, Store},
        watcher,
    },
};
use prometheus::Registry;
use serde_json::Value;
use tokio::sync::watch;

use crate::names::LOCAL_QUEUE_PREFIX;

use super::{
    hooks::Hook,
    instance as instance_rules, instance_type as it_rules,
    metrics::{self, AdmissionMetrics},
    model_store_guard::{self, Writer},
    pod_mutate::{self, Pool},
    pod_requests::{self, Bases, claims},
    pod_update, pod_validate,
    reasons::Reason,
    verdict::{FieldError, Refusal},
    workload_pin,
};
use crate::{
    auth::{Auth, PeerCertificates},
    settings,
};

/// The largest review read: a Pod and its old version at the API's object size limit.
const MAX_REVIEW: usize = 8 << 20;

/// What the binary decides for the webhooks.
#[derive(Clone, Debug)]
pub struct Options {
    /// The namespace the worker runs in.
    pub system_namespace: String,
    /// `--model-manager-service-account`: a name in the system namespace, or a full
    /// `system:serviceaccount:<ns>:<name>`.
    pub model_manager_service_account: String,
}

impl Options {
    fn model_manager_user(&self) -> String {
        let sa = &self.model_manager_service_account;
        if sa.contains(':') {
            sa.clone()
        } else {
            model_store_guard::service_account_user(&self.system_namespace, sa)
        }
    }
}

/// Why the webhooks could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The metrics could not be registered.
    #[error("registering the admission metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// The webhooks' shared state: the cluster, the pools and the settings they judge against.
pub struct Admission {
    client: kube::Client,
    bases: Bases,
    pools: Store<InstanceType>,
    settings: watch::Receiver<BTreeMap<String, String>>,
    model_manager_user: String,
    metrics: AdmissionMetrics,
}

/// What a webhook decided.
enum Decision {
    Allow(Reason),
    /// The object as it should be.
    Mutate(Reason, Value),
    Deny(Refusal),
}

impl Admission {
    /// Starts the caches and the event writer (until `stop`), and returns the webhooks' state.
    pub fn start(
        client: kube::Client,
        options: &Options,
        registry: &Registry,
        env: impl Fn(&str) -> Option<String>,
        stop: watch::Receiver<bool>,
    ) -> Result<Arc<Self>, StartError> {
        let metrics = AdmissionMetrics::new(registry)?;
        let (reader, writer) = reflector::store();
        let pools = reflector::reflector(
            writer,
            gpustack_watch::objects::<InstanceType>(
                client.clone(),
                None,
                watcher::Config::default(),
            )
            .default_backoff(),
        )
        .for_each(|_| futures::future::ready(()));
        spawn_until(stop.clone(), pools);

        let (settings_tx, settings_rx) = watch::channel(BTreeMap::new());
        let follow = settings::store::watch(&client, &options.system_namespace)
            .default_backoff()
            .for_each(move |r| {
                if let Ok((values, _)) = r {
                    settings_tx.send_replace(values);
                }
                futures::future::ready(())
            });
        spawn_until(stop.clone(), follow);

        Ok(Arc::new(Admission {
            client,
            bases: Bases::resolve(env),
            pools: reader,
            settings: settings_rx,
            model_manager_user: options.model_manager_user(),
            metrics,
        }))
    }

    /// The InstanceType that fronts LocalQueue `queue`: its `queue-entrance` label (or status)
    /// names it. The cache first; the API when the cache does not know it (yet).
    async fn pool_for(&self, queue: &str) -> Result<Option<InstanceType>, kube::Error> {
        let fronts = |it: &InstanceType| {
            it.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(it_rules::QUEUE_ENTRANCE))
                .is_some_and(|e| e == queue)
                || it
                    .status
                    .as_ref()
                    .and_then(|s| s.entrance.as_deref())
                    .is_some_and(|e| e == queue)
        };
        if let Some(it) = self.pools.state().into_iter().find(|it| fronts(it)) {
            return Ok(Some((*it).clone()));
        }
        let label_value = queue.len() <= 63
            && queue
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !label_value {
            return Ok(None);
        }
        let listed = Api::<InstanceType>::all(self.client.clone())
            .list(&ListParams::default().labels(&format!("{}={queue}", it_rules::QUEUE_ENTRANCE)))
            .await?;
        Ok(listed.items.into_iter().next())
    }

    /// The pool a Workload queued to LocalQueue `namespace/queue` goes to: the worker's own
    /// LocalQueues are known by name; any other LocalQueue by the ClusterQueue it points at,
    /// which is the worker's when an InstanceType has its name.
    async fn pool_of_workload(
        &self,
        namespace: &str,
        queue: &str,
    ) -> Result<Option<InstanceType>, kube::Error> {
        if queue.starts_with(LOCAL_QUEUE_PREFIX)
            && let Some(it) = self.pool_for(queue).await?
        {
            return Ok(Some(it));
        }
        let local = Api::<LocalQueue>::namespaced(self.client.clone(), namespace)
            .get_opt(queue)
            .await?;
        let Some(cluster_queue) = local.map(|q| q.spec.cluster_queue) else {
            return Ok(None);
        };
        let named = |it: &InstanceType| it.metadata.name.as_deref() == Some(&cluster_queue);
        if let Some(it) = self.pools.state().into_iter().find(|it| named(it)) {
            return Ok(Some((*it).clone()));
        }
        Api::<InstanceType>::all(self.client.clone())
            .get_opt(&cluster_queue)
            .await
    }

    /// Whether a boolean setting is on (its default when the Secret does not say).
    fn setting_on(&self, name: &str) -> bool {
        let values = self.settings.borrow();
        settings::catalog::find(name)
            .is_some_and(|d| settings::view::value_of(&values, d) == "true")
    }

    fn fit_affinity(&self) -> bool {
        self.setting_on("workload-fit-affinity")
    }

    /// The InstanceType `name` (cache first, then the API); a retryable refusal when it cannot
    /// be read.
    async fn pool_named(&self, name: &str) -> Result<Option<InstanceType>, Decision> {
        if name.is_empty() {
            return Ok(None);
        }
        let cached = self
            .pools
            .state()
            .into_iter()
            .find(|it| it.metadata.name.as_deref() == Some(name));
        if let Some(it) = cached {
            return Ok(Some((*it).clone()));
        }
        Api::<InstanceType>::all(self.client.clone())
            .get_opt(name)
            .await
            .map_err(|e| {
                Decision::Deny(Refusal::retry(
                    Reason::LookupFailed,
                    format!("instance type {name} could not be read ({e}); retry"),
                ))
            })
    }

    async fn instance_default(
        &self,
        req: &AdmissionRequest<DynamicObject>,
        object: &Value,
    ) -> Decision {
        // A running Instance keeps the resources it started with (they are frozen): only a
        // create or a start takes the pool's unit as it is now.
        let running = req.operation == Operation::Update
            && req
                .old_object
                .as_ref()
                .is_some_and(|o| o.data["spec"]["stop"].as_bool() != Some(true));
        let pool = if running {
            None
        } else {
            match self
                .pool_named(object["spec"]["type"].as_str().unwrap_or(""))
                .await
            {
                Ok(p) => p,
                Err(d) => return d,
            }
        };
        let overcommit = self.setting_on("instance-general-resources-overcommit");
        Decision::Mutate(
            Reason::Defaulted,
            instance_rules::default(object, pool.as_ref(), overcommit),
        )
    }

    async fn instance(&self, req: &AdmissionRequest<DynamicObject>, object: &Value) -> Decision {
        let spec = match crate::typed::from_json::<gpustack_api::instance::InstanceSpec>(
            &object["spec"],
        ) {
            Ok(s) => s,
            Err(e) => {
                return Decision::Deny(Refusal::bad_request(
                    Reason::MalformedReview,
                    format!("reading the Instance: {e}"),
                ));
            }
        };
        let name = name_of(req, object);
        let old = req
            .old_object
            .as_ref()
            .filter(|_| req.operation == Operation::Update)
            .and_then(|o| serde_json::to_value(o).ok());
        let allowed = instance_rules::Privileges {
            privileged: self.setting_on("instance-privileged-allowed"),
            host_path: self.setting_on("instance-host-path-volume-allowed"),
        };
        // What an update keeps of the escapes the Instance held is not judged again; what it
        // newly takes is, stopped or not ([`instance_rules::privileges`]).
        let held: Option<gpustack_api::instance::InstanceSpec> = old
            .as_ref()
            .and_then(|o| crate::typed::from_json(&o["spec"]).ok());
        if let Some(old) = &old {
            let phase = old["status"]["phase"].as_str().unwrap_or("");
            let mut errors = instance_rules::validate_update(old, phase, object);
            errors.extend(instance_rules::privileges(&spec, allowed, held.as_ref()));
            if let Some(r) = Refusal::invalid("Instance", &name, errors) {
                return Decision::Deny(r);
            }
            let starting = old["spec"]["stop"].as_bool() == Some(true) && !spec.stopped();
            // A running Instance was judged when it started; only a start is judged again.
            if !starting {
                return Decision::Allow(Reason::Admitted);
            }
        }
        let errors = if spec.stopped() {
            // A stopped Instance needs no pool (its pool may be gone); only its privileges.
            instance_rules::privileges(&spec, allowed, held.as_ref())
        } else {
            let pool = match self.pool_named(&spec.instance_type).await {
                Ok(p) => p,
                Err(d) => return d,
            };
            instance_rules::validate(&spec, pool.as_ref(), allowed, held.as_ref())
        };
        match Refusal::invalid("Instance", &name, errors) {
            Some(r) => Decision::Deny(r),
            None => Decision::Allow(Reason::Admitted),
        }
    }

    async fn decide(
        &self,
        hook: Hook,
        req: &AdmissionRequest<DynamicObject>,
        object: &Value,
    ) -> Decision {
        let being_deleted =
            |o: Option<&DynamicObject>| o.is_some_and(|o| o.metadata.deletion_timestamp.is_some());
        if req.operation == Operation::Update
            && (being_deleted(req.old_object.as_ref()) || being_deleted(req.object.as_ref()))
            && !hook.receives_deletion_updates()
        {
            return Decision::Allow(Reason::BeingDeleted);
        }
        match hook {
            Hook::PodMutate | Hook::PodValidate => self.pod(hook, req, object).await,
            Hook::InstanceTypeMutate => {
                let aware = self.setting_on("instance-type-aware-cpu-manufacturer");
                Decision::Mutate(Reason::Defaulted, it_rules::default(object, aware))
            }
            Hook::InstanceTypeValidate => instance_type(req, object),
            Hook::InstanceMutate => self.instance_default(req, object).await,
            Hook::InstanceValidate => self.instance(req, object).await,
            Hook::WorkloadMutate => self.workload(req, object).await,
            Hook::ModelStoreStatus => self.model_store_status(req).await,
        }
    }

    async fn pod(
        &self,
        hook: Hook,
        req: &AdmissionRequest<DynamicObject>,
        object: &Value,
    ) -> Decision {
        let pod: Pod = match crate::typed::from_json(object) {
            Ok(p) => p,
            Err(e) => {
                return Decision::Deny(Refusal::bad_request(
                    Reason::MalformedReview,
                    format!("reading the Pod: {e}"),
                ));
            }
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let cs = claims(&spec, &self.bases.names);
        let name = name_of(req, object);
        if req.operation == Operation::Update {
            return if hook == Hook::PodValidate {
                self.pod_update(req, &pod, &cs, &name)
            } else {
                // The units were computed when the Pod was created; the API server keeps them.
                Decision::Allow(Reason::NotApplicable)
            };
        }
        if cs.is_empty() {
            return Decision::Allow(Reason::NotApplicable);
        }
        if hook == Hook::PodValidate {
            return match Refusal::invalid("Pod", &name, pod_validate::validate(&cs, &self.bases)) {
                Some(r) => Decision::Deny(r),
                None => Decision::Allow(Reason::Admitted),
            };
        }
        let pool = if pod_mutate::needs_pool(&cs) {
            let queue = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(gpustack_api::kueue::QUEUE_NAME_LABEL))
                .cloned()
                .unwrap_or_default();
            match self.pool_for(&queue).await {
                Ok(Some(it)) => Some(Pool::of(&it)),
                Ok(None) => {
                    let field =
                        format!("metadata.labels[{}]", gpustack_api::kueue::QUEUE_NAME_LABEL);
                    let e = FieldError::invalid(
                        field,
                        &queue,
                        format!("no instance type fronts local queue {queue}"),
                        Reason::NoInstanceType,
                    );
                    return Decision::Deny(
                        Refusal::invalid("Pod", &name, vec![e]).expect("one error"),
                    );
                }
                Err(e) => {
                    return Decision::Deny(Refusal::retry(
                        Reason::LookupFailed,
                        format!(
                            "the instance type behind local queue {queue} could not be read ({e}); retry"
                        ),
                    ));
                }
            }
        } else {
            None
        };
        match pod_mutate::mutate(object, &cs, pool.as_ref(), &name) {
            Ok(out) => Decision::Mutate(Reason::UnitsComputed, out),
            Err(r) => Decision::Deny(r),
        }
    }

    /// An update of a Pod (or its resize): refused when it changes what was admitted.
    fn pod_update(
        &self,
        req: &AdmissionRequest<DynamicObject>,
        pod: &Pod,
        new_claims: &[pod_requests::Claim],
        name: &str,
    ) -> Decision {
        let Some(old) = req
            .old_object
            .as_ref()
            .and_then(|o| crate::typed::from_json::<Pod>(o).ok())
        else {
            return Decision::Deny(Refusal::bad_request(
                Reason::MalformedReview,
                "an UPDATE review without a readable oldObject",
            ));
        };
        let queue_of = |p: &Pod| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(gpustack_api::kueue::QUEUE_NAME_LABEL))
                .cloned()
        };
        let old_claims = claims(&old.spec.clone().unwrap_or_default(), &self.bases.names);
        let errors = pod_update::changes(
            &old_claims,
            new_claims,
            queue_of(&old).as_deref(),
            queue_of(pod).as_deref(),
            gpustack_api::kueue::QUEUE_NAME_LABEL,
        );
        match Refusal::invalid("Pod", name, errors) {
            Some(r) => Decision::Deny(r),
            None => Decision::Allow(Reason::Admitted),
        }
    }

    async fn workload(&self, req: &AdmissionRequest<DynamicObject>, object: &Value) -> Decision {
        if !self.fit_affinity() {
            return Decision::Allow(Reason::NotApplicable);
        }
        let Ok(w) = crate::typed::from_json::<gpustack_api::kueue::Workload>(object) else {
            return Decision::Allow(Reason::NotApplicable);
        };
        let queue = w.spec.queue_name.clone().unwrap_or_default();
        // Once quota is reserved the PodSets are Kueue's; a pin then would change nothing.
        if queue.is_empty() || (req.operation == Operation::Update && w.quota_reserved()) {
            return Decision::Allow(Reason::NotApplicable);
        }
        let namespace = req.namespace.clone().unwrap_or_default();
        // Never refuses: without its pool the Workload goes unpinned.
        let pool = match self.pool_of_workload(&namespace, &queue).await {
            Ok(Some(it)) => it,
            Ok(None) => return Decision::Allow(Reason::NotApplicable),
            Err(e) => {
                tracing::debug!(error = %e, queue, "reading the pool of a Workload");
                return Decision::Allow(Reason::NotApplicable);
            }
        };
        let group = pool.spec.accelerator_group.filter(|g| !g.is_empty());
        let pinned = workload_pin::pin(object, &self.bases, group.as_deref());
        if pinned == *object {
            Decision::Allow(Reason::NotApplicable)
        } else {
            Decision::Mutate(Reason::FitPinned, pinned)
        }
    }

    async fn model_store_status(&self, req: &AdmissionRequest<DynamicObject>) -> Decision {
        let writer = Writer {
            username: req.user_info.username.clone().unwrap_or_default(),
            groups: req.user_info.groups.clone().unwrap_or_default(),
            extra: req.user_info.extra.clone().unwrap_or_default(),
        };
        let mut pod_node = None;
        if let Some(pod) = model_store_guard::needs_pod_lookup(&writer, &self.model_manager_user) {
            // The service account's namespace is the Pod's.
            let ns = self.model_manager_user.split(':').nth(2).unwrap_or("");
            match Api::<Pod>::namespaced(self.client.clone(), ns)
                .get_opt(&pod)
                .await
            {
                Ok(p) => pod_node = p.and_then(|p| p.spec).and_then(|s| s.node_name),
                Err(e) => {
                    return Decision::Deny(Refusal::retry(
                        Reason::LookupFailed,
                        format!("the Pod {ns}/{pod} of the writer could not be read ({e}); retry"),
                    ));
                }
            }
        }
        match model_store_guard::check(
            &writer,
            &self.model_manager_user,
            &req.name,
            pod_node.as_deref(),
        ) {
            Ok(()) => Decision::Allow(Reason::Admitted),
            Err(r) => Decision::Deny(r),
        }
    }

    /// Answers one review (in a span of its own, under the request's).
    #[tracing::instrument(
        level = "debug",
        name = "admission review",
        skip_all,
        fields(webhook = hook.path(), result = tracing::field::Empty)
    )]
    async fn answer(&self, hook: Hook, body: &[u8]) -> Response {
        let started = Instant::now();
        let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("not an AdmissionReview: {e}"),
                )
                    .into_response();
            }
        };
        let req: AdmissionRequest<DynamicObject> = match review.try_into() {
            Ok(r) => r,
            Err(e) => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("not an AdmissionReview request: {e}"),
                )
                    .into_response();
            }
        };
        let object = req
            .object
            .as_ref()
            .and_then(|o| serde_json::to_value(o).ok())
            .unwrap_or(Value::Null);
        let decision = self.decide(hook, &req, &object).await;
        let mut response = AdmissionResponse::from(&req);
        let (result, reason) = match decision {
            Decision::Allow(reason) => (metrics::Result::Allowed, reason),
            Decision::Mutate(reason, changed) => {
                let patch = json_patch::diff(&object, &changed);
                if patch.0.is_empty() {
                    (metrics::Result::Allowed, Reason::Admitted)
                } else {
                    match response.clone().with_patch(patch) {
                        Ok(r) => {
                            response = r;
                            (metrics::Result::Patched, reason)
                        }
                        Err(e) => {
                            let refusal = Refusal::bad_request(
                                Reason::MalformedReview,
                                format!("writing the patch: {e}"),
                            );
                            response = deny(response, &refusal);
                            (metrics::Result::Denied, refusal.reason)
                        }
                    }
                }
            }
            Decision::Deny(refusal) => {
                response = deny(response, &refusal);
                (metrics::Result::Denied, refusal.reason)
            }
        };
        tracing::Span::current().record("result", result.as_str());
        self.metrics
            .observe(hook, result, reason, started.elapsed());
        match serde_json::to_vec(&review_json(response)) {
            Ok(body) => (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    }
}

fn instance_type(req: &AdmissionRequest<DynamicObject>, object: &Value) -> Decision {
    let spec_of = |v: &Value| {
        crate::typed::from_json::<gpustack_api::instance_type::InstanceTypeSpec>(&v["spec"])
    };
    let name = name_of(req, object);
    let new = match spec_of(object) {
        Ok(s) => s,
        Err(e) => {
            return Decision::Deny(Refusal::bad_request(
                Reason::MalformedReview,
                format!("reading the InstanceType: {e}"),
            ));
        }
    };
    let errors = match (&req.operation, &req.old_object) {
        (Operation::Update, Some(old)) => {
            let old = serde_json::to_value(old)
                .ok()
                .and_then(|o| spec_of(&o).ok())
                .unwrap_or_default();
            it_rules::validate_update(&old, &new)
        }
        _ => it_rules::validate_create(&new),
    };
    match Refusal::invalid("InstanceType", &name, errors) {
        Some(r) => Decision::Deny(r),
        None => Decision::Allow(Reason::Admitted),
    }
}

/// The answer as sent: the patch base64-encoded, as the API expects it (the response type
/// would write its bytes as a list of numbers).
fn review_json(response: AdmissionResponse) -> Value {
    use base64::Engine;
    let patch = response.patch.clone();
    let mut v = serde_json::to_value(response.into_review()).unwrap_or(Value::Null);
    if let Some(p) = patch {
        v["response"]["patch"] = Value::String(base64::engine::general_purpose::STANDARD.encode(p));
    }
    v
}

fn deny(mut response: AdmissionResponse, refusal: &Refusal) -> AdmissionResponse {
    response.allowed = false;
    response.result = refusal.status();
    response
}

/// The object's name, else its `generateName` (a create may not be named yet).
fn name_of(req: &AdmissionRequest<DynamicObject>, object: &Value) -> String {
    [
        Some(req.name.as_str()),
        object["metadata"]["name"].as_str(),
        object["metadata"]["generateName"].as_str(),
    ]
    .into_iter()
    .flatten()
    .find(|n| !n.is_empty())
    .unwrap_or("")
    .to_owned()
}

fn spawn_until(mut stop: watch::Receiver<bool>, work: impl Future<Output = ()> + Send + 'static) {
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            _ = work => {}
        }
    });
}

/// Who may send reviews.
pub struct Callers {
    /// Who is asking.
    pub auth: Arc<Auth>,
    /// `--allow-anonymous-reviews`: for API servers not configured to authenticate to their
    /// webhooks (kube-apiserver without an admission kubeconfig).
    pub anonymous: bool,
}

struct Served {
    admission: Arc<Admission>,
    callers: Callers,
}

/// The webhooks' routes (each path answers POSTed reviews from the callers allowed).
pub fn router(admission: Arc<Admission>, callers: Callers) -> Router {
    let mut router = Router::new();
    for hook in Hook::ALL {
        router = router.route(
            hook.path(),
            post(
                move |State(s): State<Arc<Served>>,
                      peer: Option<Extension<PeerCertificates>>,
                      headers: HeaderMap,
                      body: Bytes| async move {
                    if !s.callers.anonymous
                        && let Err(denied) = s
                            .callers
                            .auth
                            .check_review(peer.as_ref().map(|p| &p.0), &headers, hook.path())
                            .await
                    {
                        s.admission.metrics.observe(
                            hook,
                            metrics::Result::Denied,
                            Reason::CallerNotAllowed,
                            std::time::Duration::ZERO,
                        );
                        return denied.error.into_response();
                    }
                    s.admission.answer(hook, &body).await
                },
            ),
        );
    }
    router
        .layer(DefaultBodyLimit::max(MAX_REVIEW))
        .with_state(Arc::new(Served { admission, callers }))
}
