//! A read-only kind computed in memory (fleet clusters, aggregates): the current objects by
//! name, published as whole snapshots under a version, and served as Kubernetes lists (label
//! and field selectors, `limit`/`continue`), single objects and watches. A watch resumes from
//! any snapshot still retained (its diff to the current one first); an older version answers
//! 410 Gone and the client lists again, as with any API server.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use gpustack_kube_rest::{
    list, negotiate,
    path::ResourcePath,
    resource::ResourceDef,
    response::json_response,
    selectors::{FieldSelector, LabelSelector, labels_of},
    status::ApiError,
    table::IncludeObject,
    watch::{self, Framer},
};
use serde_json::Value;
use tokio::sync::watch as signal;

use crate::api::views::{Asked, represent};

/// Snapshots kept for watches that resume from a version.
const HISTORY: usize = 64;
/// How long a watch lasts when the client does not say.
const DEFAULT_WATCH: Duration = Duration::from_secs(1800);

/// The objects of one kind at one version.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The version this snapshot was taken at.
    pub version: u64,
    /// The objects, by name.
    pub objects: BTreeMap<String, Value>,
}

/// One computed kind: what it serves and its recent snapshots.
pub struct Computed {
    /// What the kind serves.
    pub def: ResourceDef,
    history: Mutex<VecDeque<Arc<Snapshot>>>,
    current: signal::Sender<Arc<Snapshot>>,
}

/// Whether two renderings of an object differ other than in their resourceVersion.
fn same_content(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        v
    };
    strip(a) == strip(b)
}

impl Computed {
    /// A kind with no objects yet.
    pub fn new(def: ResourceDef) -> Self {
        let (current, _) = signal::channel(Arc::new(Snapshot::default()));
        Computed {
            def,
            history: Mutex::new(VecDeque::new()),
            current,
        }
    }

    /// The snapshot being served.
    pub fn current(&self) -> Arc<Snapshot> {
        self.current.borrow().clone()
    }

    /// Publishes `objects` as the kind's state at `version`, unless nothing changed. Each object
    /// keeps the resourceVersion of its last change; a changed one takes `version`.
    pub fn publish(&self, version: u64, objects: BTreeMap<String, Value>) {
        let before = self.current();
        let mut changed = before.objects.len() != objects.len();
        let objects = objects
            .into_iter()
            .map(|(name, mut obj)| {
                let rv = match before.objects.get(&name) {
                    Some(prev) if same_content(prev, &obj) => {
                        prev.pointer("/metadata/resourceVersion").cloned()
                    }
                    _ => {
                        changed = true;
                        Some(Value::String(version.to_string()))
                    }
                };
                obj["metadata"]["resourceVersion"] = rv.unwrap_or_default();
                (name, obj)
            })
            .collect();
        if !changed {
            return;
        }
        let snap = Arc::new(Snapshot { version, objects });
        let mut history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        history.push_back(snap.clone());
        while history.len() > HISTORY {
            history.pop_front();
        }
        drop(history);
        self.current.send_replace(snap);
    }

    /// The retained snapshot at `version`.
    fn at(&self, version: u64) -> Option<Arc<Snapshot>> {
        let history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        history.iter().find(|s| s.version == version).cloned()
    }

    /// Serves a read (`GET` of the list, one object, or a watch); anything else is refused.
    pub fn read(&self, p: &ResourcePath, asked: &Asked) -> Result<Response, ApiError> {
        let accept = asked.accept();
        let representation = negotiate::for_resource(accept, true)
            .ok_or_else(|| ApiError::not_acceptable(accept))?;
        let q = Query::parse(asked.query.as_deref());
        let include =
            IncludeObject::parse(q.get("includeObject")).map_err(ApiError::bad_request)?;
        if p.subresource.is_some() || p.namespace.is_some() {
            return Err(ApiError::not_found_path());
        }
        if asked.method != Method::GET {
            return Err(ApiError::method_not_allowed(asked.method.as_str()));
        }
        let labels = match q.get("labelSelector") {
            Some(s) if !s.is_empty() => {
                Some(LabelSelector::parse(s).map_err(ApiError::bad_request)?)
            }
            _ => None,
        };
        let fields = match q.get("fieldSelector") {
            Some(s) if !s.is_empty() => Some(
                FieldSelector::parse(s, &self.def.selectable_fields)
                    .map_err(ApiError::bad_request)?,
            ),
            _ => None,
        };
        let filter = Filter { labels, fields };
        let snap = self.current();
        if let Some(name) = &p.name {
            let obj = snap
                .objects
                .get(name)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&self.def.group, &self.def.plural, name))?;
            return Ok(json_response(
                StatusCode::OK,
                &represent(&self.def, "v1", representation, include, obj),
            ));
        }
        if asked.watch {
            let framer = Framer::new(self.def.clone(), "v1", representation, include);
            let timeout = watch::timeout(q.get("timeoutSeconds"), DEFAULT_WATCH)?;
            return self.watch(q.get("resourceVersion"), framer, filter, timeout);
        }
        let limit = list::limit(q.get("limit"))?;
        let from = list::continue_from(q.get("continue"))?;
        let items = snap
            .objects
            .values()
            .filter(|o| filter.matches(o))
            .cloned()
            .collect();
        let (items, next) = list::page(items, limit, from.as_ref(), snap.version);
        let rv = from.as_ref().map_or(snap.version, |c| c.rv);
        let body = list::render(
            &self.def,
            "v1",
            representation,
            include,
            items,
            list::metadata(rv, next.as_ref()),
        );
        Ok(json_response(StatusCode::OK, &body))
    }

    fn watch(
        &self,
        from: Option<&str>,
        framer: Framer,
        filter: Filter,
        timeout: Duration,
    ) -> Result<Response, ApiError> {
        let mut changes = self.current.subscribe();
        let start = match from {
            None | Some("" | "0") => Arc::new(Snapshot::default()),
            Some(v) => {
                let version: u64 = v.parse().map_err(|_| {
                    ApiError::bad_request(format!("resourceVersion: Invalid value: \"{v}\""))
                })?;
                match self.at(version) {
                    Some(s) => s,
                    None if version == changes.borrow().version => changes.borrow().clone(),
                    None => {
                        return Err(ApiError::expired(format!(
                            "too old resource version: {version}"
                        )));
                    }
                }
            }
        };
        let events = async_stream_of(move |tx| async move {
            let mut shown = start;
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                let now = changes.borrow_and_update().clone();
                let out = diff(&shown, &now, &filter, &framer);
                if !out.is_empty() && tx.send(Bytes::from(out)).await.is_err() {
                    return;
                }
                shown = now;
                tokio::select! {
                    _ = &mut deadline => return,
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = tx.closed() => return,
                }
            }
        });
        Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(events),
        )
            .into_response())
    }
}

/// The events that take a watcher from `before` to `after`, as seen through `filter` (an object
/// leaving the selection is DELETED, one entering it ADDED).
fn diff(before: &Snapshot, after: &Snapshot, filter: &Filter, framer: &Framer) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, obj) in &after.objects {
        let now = filter.matches(obj);
        let was = before.objects.get(name).filter(|o| filter.matches(o));
        match (was, now) {
            (None, true) => out.extend_from_slice(&framer.event("ADDED", obj.clone())),
            (Some(prev), true) if !same_content(prev, obj) => {
                out.extend_from_slice(&framer.event("MODIFIED", obj.clone()))
            }
            (Some(prev), false) => out.extend_from_slice(&framer.event("DELETED", prev.clone())),
            _ => {}
        }
    }
    for (name, prev) in &before.objects {
        if !after.objects.contains_key(name) && filter.matches(prev) {
            out.extend_from_slice(&framer.event("DELETED", prev.clone()));
        }
    }
    out
}

/// A body stream fed by a task (the task ends when the client goes).
fn async_stream_of<F, Fut>(
    run: F,
) -> impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(run(tx));
    futures::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(rx), Ok)
}

/// Label and field selectors of a request.
#[derive(Default)]
pub struct Filter {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.labels
            .as_ref()
            .is_none_or(|l| l.matches(&labels_of(obj)))
            && self.fields.as_ref().is_none_or(|f| f.matches(obj))
    }
}

/// A request's query parameters, decoded.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Decodes `query` (an undecodable one reads as empty).
    pub fn parse(query: Option<&str>) -> Self {
        let pairs = query
            .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
            .unwrap_or_default();
        Query(pairs)
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpustack_kube_rest::negotiate::Representation;
    use serde_json::json;

    fn def() -> ResourceDef {
        super::super::resources::clusters()
    }

    fn obj(name: &str, phase: &str) -> Value {
        json!({"apiVersion": "fleet.gpustack.ai/v1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"phase": phase}}, "status": {"phase": phase}})
    }

    fn events(bytes: &[u8]) -> Vec<(String, String)> {
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let v: Value = serde_json::from_slice(l).unwrap();
                (
                    v["type"].as_str().unwrap().to_owned(),
                    v["object"]["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn unchanged_objects_keep_their_version_and_no_snapshot_is_published() {
        let c = Computed::new(def());
        c.publish(5, BTreeMap::from([("a".into(), obj("a", "Ready"))]));
        c.publish(
            6,
            BTreeMap::from([
                ("a".into(), obj("a", "Ready")),
                ("b".into(), obj("b", "Ready")),
            ]),
        );
        let now = c.current();
        assert_eq!(now.version, 6);
        assert_eq!(now.objects["a"]["metadata"]["resourceVersion"], "5");
        assert_eq!(now.objects["b"]["metadata"]["resourceVersion"], "6");
        c.publish(7, now.objects.clone());
        assert_eq!(c.current().version, 6, "nothing changed: nothing published");
    }

    #[test]
    fn diffs_follow_the_selection() {
        let framer = Framer::new(def(), "v1", Representation::Json, IncludeObject::Metadata);
        let ready = Filter {
            labels: Some(LabelSelector::parse("phase=Ready").unwrap()),
            fields: None,
        };
        let before = Snapshot {
            version: 1,
            objects: BTreeMap::from([
                ("a".into(), obj("a", "Ready")),
                ("b".into(), obj("b", "Ready")),
                ("c".into(), obj("c", "Ready")),
            ]),
        };
        let after = Snapshot {
            version: 2,
            objects: BTreeMap::from([
                ("a".into(), obj("a", "Degraded")),
                ("c".into(), obj("c", "Ready")),
                ("d".into(), obj("d", "Ready")),
            ]),
        };
        assert_eq!(
            events(&diff(&before, &after, &ready, &framer)),
            [
                ("DELETED".to_owned(), "a".to_owned()),
                ("ADDED".into(), "d".into()),
                ("DELETED".into(), "b".into()),
            ]
        );
        let all = Filter::default();
        assert_eq!(
            events(&diff(&before, &after, &all, &framer)),
            [
                ("MODIFIED".to_owned(), "a".to_owned()),
                ("ADDED".into(), "d".into()),
                ("DELETED".into(), "b".into()),
            ]
        );
    }
}
