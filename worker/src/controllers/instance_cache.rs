//! The worker's one cache of Instances and their Pods: reflector stores that the Instance
//! controller ([`super::instances`]) reconciles from and the `instances/*` subresources answer
//! from, so that neither reads the cluster per pass or per request. Started once per process
//! (every replica serves the API; only the leader reconciles) and shared by both.
//!
//! Objects are kept as the two readers use them: without their field-ownership records and
//! the last-applied copy `kubectl apply` leaves, which together outweigh a stopped Instance.
//! A subscriber (the controller, while it leads) gets every cached object once, then every
//! change after the store has taken it, so a trigger never reads an older store.

use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use gpustack_api::{instance::Instance, labels::RESOURCE_TYPE};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::instance_pod::INSTANCES;

/// The annotation `kubectl apply` keeps a whole copy of the object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what neither the controller nor the subresources read.
pub fn trim<K: Resource>(o: &mut K) {
    let meta = o.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(LAST_APPLIED);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Who hears of each change of a `K`; a subscriber that went away is dropped at the next one.
type Listeners<K> = Arc<Mutex<Vec<mpsc::UnboundedSender<Arc<K>>>>>;

/// One kind's store and its subscribers.
struct Kind<K: 'static + Resource<DynamicType = ()> + Clone> {
    store: Store<K>,
    listeners: Listeners<K>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Kind<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync,
{
    fn start(client: &kube::Client, config: watcher::Config) -> Self {
        let (store, writer) = reflector::store();
        let listeners: Listeners<K> = Default::default();
        let stream = gpustack_watch::objects::<K>(client.clone(), None, config)
            .default_backoff()
            .modify(trim::<K>)
            .reflect(writer);
        let (reader, heard) = (store.clone(), listeners.clone());
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                let changed = match ev {
                    // The store's own copy: a subscriber holds no second one.
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => reader
                        .get(&ObjectRef::from_obj(&o))
                        .unwrap_or_else(|| Arc::new(o)),
                    Ok(watcher::Event::Delete(o)) => Arc::new(o),
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::debug!("watch {}: {e}", K::plural(&()));
                        continue;
                    }
                };
                heard
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|tx| tx.send(changed.clone()).is_ok());
            }
        });
        Kind {
            store,
            listeners,
            task,
        }
    }

    /// Every cached object, then every change.
    fn subscribe(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let (tx, rx) = mpsc::unbounded_channel();
        // Held across the snapshot: a change the store takes after it is sent after this
        // subscriber is listed, so none falls between the two.
        let mut listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        for o in self.store.state() {
            let _ = tx.send(o);
        }
        listeners.push(tx);
        UnboundedReceiverStream::new(rx)
    }

    fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store.get(&ObjectRef::new(name).within(namespace))
    }
}

impl<K: 'static + Resource<DynamicType = ()> + Clone> Drop for Kind<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Instances and the Pods labelled as theirs, cached; the watches stop when it is dropped.
pub struct InstanceCache {
    instances: Kind<Instance>,
    pods: Kind<Pod>,
}

impl InstanceCache {
    /// Starts the watches (they retry until the kinds are served).
    pub fn start(client: &kube::Client) -> Arc<Self> {
        let ours = watcher::Config::default().labels(&format!("{RESOURCE_TYPE}={INSTANCES}"));
        Arc::new(InstanceCache {
            instances: Kind::start(client, watcher::Config::default()),
            pods: Kind::start(client, ours),
        })
    }

    /// Every Instance the cache holds.
    pub fn instances(&self) -> &Store<Instance> {
        &self.instances.store
    }

    /// Every Instance Pod the cache holds.
    pub fn pods(&self) -> &Store<Pod> {
        &self.pods.store
    }

    /// One Instance, if the cache holds it.
    pub fn instance(&self, namespace: &str, name: &str) -> Option<Arc<Instance>> {
        self.instances.get(namespace, name)
    }

    /// One Pod, if the cache holds it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.get(namespace, name)
    }

    /// Every cached Instance, then every change of one.
    pub fn instance_changes(&self) -> impl Stream<Item = Arc<Instance>> + Send + 'static {
        self.instances.subscribe()
    }

    /// Every cached Instance Pod, then every change of one.
    pub fn pod_changes(&self) -> impl Stream<Item = Arc<Pod>> + Send + 'static {
        self.pods.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_ownership_records_and_the_applied_copy_go() {
        let mut inst: Instance = serde_json::from_value(json!({
            "metadata": {"name": "box", "namespace": "team",
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                "annotations": {LAST_APPLIED: "{\"spec\":{}}", "note.gpustack.ai/a": "b"}},
            "spec": {"type": "h100"},
        }))
        .unwrap();
        trim(&mut inst);
        assert!(inst.metadata.managed_fields.is_none());
        let kept = inst.metadata.annotations.clone().unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "box", "annotations": {LAST_APPLIED: "{}"}},
        }))
        .unwrap();
        trim(&mut pod);
        assert!(pod.metadata.annotations.is_none());
    }
}
