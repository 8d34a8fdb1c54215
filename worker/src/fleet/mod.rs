//! `fleet.gpustack.ai/v1`: the hub's view of every upstream cluster, served by the worker from
//! the `worker-gateway`'s mirror. `devices` are forwarded to the gateway's fleet view as they
//! stream (the worker holds none of them); `clusters` render the gateway's subscription status
//! and create or delete subscriptions; `instancetypes` and `instancetypeflavors` are computed
//! from the mirrored InstanceTypes, which are few and kept here, and change as members do.
//!
//! When the gateway does not answer, the group's discovery answers 503 with the reason, which
//! the aggregator reports as the APIService `v1.fleet.gpustack.ai` being unavailable; the rest of
//! the worker is unaffected.

pub mod aggregate;
pub mod clusters;
pub mod computed;
pub mod gateway;
pub mod resources;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, RwLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{body::Bytes, http::Method, response::Response};
use futures::StreamExt;
use gpustack_api::instance_type::InstanceType;
use gpustack_kube_rest::{path::ResourcePath, response::json_response, status::ApiError};
use http_body_util::BodyExt;
use kube::{
    ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use serde_json::Value;
use tokio::sync::{Notify, watch};

use crate::{
    api::views::{self, Asked, View},
    auth::{
        Auth,
        identity::{Attributes, User},
    },
};
use computed::Computed;
use resources::{CLUSTER_LABEL, FLEET_GROUP, FLEET_VERSION};

/// How often the gateway's subscription status is read (it has no watch).
const STATUS_EVERY: Duration = Duration::from_secs(2);
/// Longest status document read from the gateway.
const MAX_STATUS: usize = 16 * 1024 * 1024;
/// The version the mirrored InstanceTypes are read at.
const IT_STORAGE_VERSION: &str = "v1alpha1";

/// Whether the gateway answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Health {
    /// Not asked yet.
    Unknown,
    /// It answered the last probe.
    Answering,
    /// The last probe failed (why).
    Unreachable(String),
}

/// The fleet API's state, shared by the requests and the task that follows the gateway.
pub struct Fleet {
    /// Where the hub's gateway is.
    pub address: gateway::Address,
    /// Clients of the gateway.
    pub clients: gateway::Clients,
    /// The worker's own cluster, where the Secrets `clusters` name are read.
    pub local: kube::Client,
    /// Where an unqualified `secretRef` of a `Cluster` is looked up.
    pub system_namespace: String,
    /// The `clusters` kind, computed from the gateway's members.
    pub clusters: Computed,
    /// The fleet's InstanceTypes, aggregated across clusters.
    pub instance_types: Computed,
    /// The fleet's flavors, aggregated across clusters.
    pub flavors: Computed,
    /// Everything the group serves, for discovery and OpenAPI.
    pub defs: Vec<gpustack_kube_rest::resource::ResourceDef>,
    devices: View,
    instances: View,
    health: RwLock<Health>,
    /// Signalled the first time the gateway answers (the APIService is registered then).
    pub answered: Notify,
    ever_answered: AtomicBool,
    version: AtomicU64,
}

impl Fleet {
    /// The fleet API over the gateway at `address`; its versions start from the clock.
    pub fn new(
        address: gateway::Address,
        clients: gateway::Clients,
        local: kube::Client,
        system_namespace: String,
    ) -> Self {
        // Versions start from the clock, so that one a client kept from an earlier process is
        // not mistaken for one of this process (it answers 410 and the client lists again).
        let start = jiff::Timestamp::now().as_microsecond().max(1) as u64;
        Fleet {
            address,
            clients,
            local,
            system_namespace,
            clusters: Computed::new(resources::clusters()),
            instance_types: Computed::new(resources::instance_types()),
            flavors: Computed::new(resources::instance_type_flavors()),
            defs: resources::all(),
            devices: View {
                def: resources::devices(),
                served: FLEET_VERSION.into(),
                storage: IT_STORAGE_VERSION.into(),
                storage_group: crate::names::WORKER_GROUP.into(),
            },
            instances: View {
                def: resources::instances(),
                served: FLEET_VERSION.into(),
                storage: IT_STORAGE_VERSION.into(),
                storage_group: crate::names::WORKER_GROUP.into(),
            },
            health: RwLock::new(Health::Unknown),
            answered: Notify::new(),
            ever_answered: AtomicBool::new(false),
            version: AtomicU64::new(start),
        }
    }

    /// Whether the gateway answered last time it was asked.
    pub fn health(&self) -> Health {
        self.health
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether the gateway has answered since the process started.
    pub fn has_answered(&self) -> bool {
        self.ever_answered.load(Ordering::Relaxed)
    }

    fn set_health(&self, h: Health) {
        let mut cur = self.health.write().unwrap_or_else(|p| p.into_inner());
        if *cur != h {
            match &h {
                Health::Answering => tracing::info!(gateway = %self.address, "the gateway answers"),
                // A gateway lost is worth a warning; one never seen (a worker without a hub,
                // the default socket absent) only a note.
                Health::Unreachable(why) if self.has_answered() => {
                    tracing::warn!(gateway = %self.address, "the gateway does not answer: {why}")
                }
                Health::Unreachable(why) => tracing::info!(
                    gateway = %self.address,
                    "no gateway answers, so no fleet is served until one does: {why}"
                ),
                Health::Unknown => {}
            }
            if h == Health::Answering {
                self.ever_answered.store(true, Ordering::Relaxed);
                self.answered.notify_waiters();
                self.answered.notify_one();
            }
            *cur = h;
        }
    }

    fn next_version(&self) -> u64 {
        self.version.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether a request is for the fleet group.
    pub fn serves(group: &str) -> bool {
        group == FLEET_GROUP
    }

    /// The reason the group cannot be served now, if any.
    pub fn unavailable(&self) -> Option<ApiError> {
        match self.health() {
            Health::Answering => None,
            Health::Unknown => Some(ApiError::new(
                503,
                "ServiceUnavailable",
                format!(
                    "the fleet API has not reached the gateway ({}) yet",
                    self.address
                ),
            )),
            Health::Unreachable(why) => Some(ApiError::new(
                503,
                "ServiceUnavailable",
                format!("the gateway ({}) does not answer: {why}", self.address),
            )),
        }
    }

    /// Serves one request of the fleet group.
    pub async fn handle(
        &self,
        p: &ResourcePath,
        asked: Asked,
        body: Bytes,
        caller: Caller<'_>,
    ) -> Result<Response, ApiError> {
        if p.version != FLEET_VERSION {
            return Err(ApiError::not_found_path());
        }
        match p.resource.as_str() {
            "devices" => {
                if asked.method != Method::GET {
                    return Err(read_only("devices"));
                }
                if p.subresource.is_some() || p.namespace.is_some() {
                    return Err(ApiError::not_found_path());
                }
                views::handle(&self.clients.fleet, &self.devices, asked, body).await
            }
            "instances" => {
                if asked.method != Method::GET {
                    return Err(read_only("instances"));
                }
                if p.subresource.is_some() {
                    return Err(ApiError::not_found_path());
                }
                views::handle(&self.clients.fleet, &self.instances, asked, body).await
            }
            "instancetypes" => self.instance_types.read(p, &asked),
            "instancetypeflavors" => self.flavors.read(p, &asked),
            "clusters" => match (&asked.method, &p.name) {
                (&Method::POST, None) if p.subresource.is_none() => {
                    self.create(&body, caller).await
                }
                (&Method::DELETE, Some(name)) if p.subresource.is_none() => self.delete(name).await,
                _ => self.clusters.read(p, &asked),
            },
            _ => Err(ApiError::not_found_path()),
        }
    }

    async fn create(&self, body: &Bytes, caller: Caller<'_>) -> Result<Response, ApiError> {
        let obj = gpustack_kube_rest::bounded::yaml_value(body, views::MAX_BODY)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))?;
        let checked = clusters::check(&obj, &self.system_namespace)?;
        // The worker reads the Secret with its own identity: only for a caller who may read it.
        let read_secret = Attributes::Resource {
            verb: "get".into(),
            group: String::new(),
            version: "v1".into(),
            resource: "secrets".into(),
            subresource: String::new(),
            namespace: checked.namespace.clone(),
            name: checked.secret.clone(),
        };
        if !caller.auth.may(caller.user, &read_secret).await? {
            return Err(clusters::secret_forbidden(&checked, &caller.user.name));
        }
        if self.clusters.current().objects.contains_key(&checked.name) {
            return Err(clusters::already_exists(&checked.name));
        }
        let request = clusters::subscription(&self.local, &checked).await?;
        let (code, answer) = self
            .gateway_call(Method::POST, "/apis/workers", Some(request))
            .await?;
        if !(200..300).contains(&code) {
            return Err(clusters::refused(&checked.name, code, &answer));
        }
        tracing::info!(cluster = %checked.name, "subscribed through the gateway");
        self.refresh_clusters().await;
        let mut created = obj;
        created["apiVersion"] = Value::String(format!("{FLEET_GROUP}/{FLEET_VERSION}"));
        created["kind"] = Value::String("Cluster".into());
        if let Some(now) = self.clusters.current().objects.get(&checked.name) {
            created["status"] = now["status"].clone();
            created["metadata"]["resourceVersion"] = now["metadata"]["resourceVersion"].clone();
        }
        Ok(json_response(axum::http::StatusCode::CREATED, &created))
    }

    async fn delete(&self, name: &str) -> Result<Response, ApiError> {
        let path = format!("/apis/workers?cluster={name}");
        if !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(clusters::not_found(name));
        }
        let (code, answer) = self.gateway_call(Method::DELETE, &path, None).await?;
        match code {
            200..=299 => {}
            404 => return Err(clusters::not_found(name)),
            _ => return Err(clusters::refused(name, code, &answer)),
        }
        tracing::info!(cluster = %name, "unsubscribed through the gateway");
        let last = self.clusters.current().objects.get(name).cloned();
        self.refresh_clusters().await;
        let body = last.unwrap_or_else(|| {
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success",
                "details": {"name": name, "group": FLEET_GROUP, "kind": "clusters"}})
        });
        Ok(json_response(axum::http::StatusCode::OK, &body))
    }

    /// One request to the gateway's root; its status code and JSON answer.
    async fn gateway_call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), ApiError> {
        let unreachable = |e: &dyn std::fmt::Display| {
            ApiError::new(
                503,
                "ServiceUnavailable",
                format!("the gateway ({}) does not answer: {e}", self.address),
            )
        };
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::ACCEPT, "application/json");
        let payload = match body {
            Some(v) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                serde_json::to_vec(&v).unwrap_or_default()
            }
            None => Vec::new(),
        };
        let request = request
            .body(kube::client::Body::from(payload))
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let answer = self
            .clients
            .root
            .send(request)
            .await
            .map_err(|e| unreachable(&e))?;
        let code = answer.status().as_u16();
        let bytes = http_body_util::Limited::new(answer.into_body(), MAX_STATUS)
            .collect()
            .await
            .map_err(|e| unreachable(&e))?
            .to_bytes();
        Ok((code, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    /// Reads the subscriptions' status once and publishes it; records whether the gateway
    /// answered. Returns whether the clusters' phases changed.
    async fn refresh_clusters(&self) -> bool {
        let before = clusters::phases(&self.clusters.current().objects);
        match self.gateway_call(Method::GET, "/apis/workers", None).await {
            Ok((200, doc)) => {
                self.set_health(Health::Answering);
                self.clusters
                    .publish(self.next_version(), clusters::from_status(&doc));
            }
            Ok((code, doc)) => self.set_health(Health::Unreachable(format!(
                "GET /apis/workers answered {code}: {}",
                doc["message"].as_str().unwrap_or("")
            ))),
            Err(e) => self.set_health(Health::Unreachable(e.message)),
        }
        clusters::phases(&self.clusters.current().objects) != before
    }

    fn publish_aggregates(&self, members: &BTreeMap<String, InstanceType>) {
        let members: Vec<aggregate::Member> = members
            .iter()
            .filter_map(|(fleet_name, it)| {
                let cluster = it.labels().get(CLUSTER_LABEL)?.clone();
                let name = fleet_name
                    .strip_prefix(&format!("{cluster}."))
                    .unwrap_or(fleet_name)
                    .to_owned();
                Some(aggregate::Member {
                    cluster,
                    name,
                    it: it.clone(),
                })
            })
            .collect();
        let phases = clusters::phases(&self.clusters.current().objects);
        let version = self.next_version();
        self.instance_types
            .publish(version, aggregate::instance_types(&members, &phases));
        self.flavors.publish(version, aggregate::flavors(&members));
    }
}

/// Who asks, and how to check what else they may do.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    /// How requests are checked.
    pub auth: &'a Auth,
    /// Who asks.
    pub user: &'a User,
}

fn read_only(plural: &str) -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        format!(
            "{plural}.{FLEET_GROUP} are the upstream clusters' objects as mirrored: they can only be read"
        ),
    )
}

/// Follows the gateway until `stop`: its subscriptions' status every few seconds, and the
/// mirrored InstanceTypes as they change, recomputing the aggregates on either.
pub async fn follow(fleet: Arc<Fleet>, mut stop: watch::Receiver<bool>) {
    let mut events = gpustack_watch::objects::<InstanceType>(
        fleet.clients.fleet.clone(),
        None,
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed();
    let mut members: BTreeMap<String, InstanceType> = BTreeMap::new();
    let mut listing: BTreeMap<String, InstanceType> = BTreeMap::new();
    let mut tick = tokio::time::interval(STATUS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = async { stop.wait_for(|s| *s).await.map(|_| ()) } => return,
            _ = tick.tick() => {
                if fleet.refresh_clusters().await {
                    fleet.publish_aggregates(&members);
                }
            }
            ev = events.next() => {
                let changed = match ev {
                    Some(Ok(watcher::Event::Init)) => { listing.clear(); false }
                    Some(Ok(watcher::Event::InitApply(it))) => { listing.insert(it.name_any(), it); false }
                    Some(Ok(watcher::Event::InitDone)) => { members = std::mem::take(&mut listing); true }
                    Some(Ok(watcher::Event::Apply(it))) => { members.insert(it.name_any(), it); true }
                    Some(Ok(watcher::Event::Delete(it))) => { members.remove(&it.name_any()).is_some() }
                    Some(Err(e)) => {
                        tracing::debug!("following the fleet's instance types: {e}");
                        false
                    }
                    None => return,
                };
                if changed {
                    fleet.publish_aggregates(&members);
                }
            }
        }
    }
}
