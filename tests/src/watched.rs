//! What the stand-ins read, kept by a watch (kube-runtime's reflector) rather than listed on
//! every pass: a fleet of stand-ins listing ten times a second was most of what they cost the
//! cluster under test, and a benchmark should measure the worker, not them.

use std::sync::Arc;

use futures::StreamExt;
use kube::{
    Api, Resource,
    runtime::{WatchStreamExt, reflector, watcher},
};

/// The objects of one watch, kept current until dropped.
pub struct Watched<K: Resource + 'static>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    reader: reflector::Store<K>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Watched<K>
where
    K: Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Default,
{
    /// Starts watching `api` (on the current tokio runtime); a broken watch is started again.
    pub fn start(api: Api<K>, config: watcher::Config) -> Self {
        let (reader, writer) = reflector::store();
        let task = tokio::spawn(async move {
            let events =
                reflector(writer, watcher(api, config).default_backoff()).touched_objects();
            futures::pin_mut!(events);
            while events.next().await.is_some() {}
        });
        Watched { reader, task }
    }

    /// Everything it holds now (nothing before the first list is in).
    pub fn state(&self) -> Vec<Arc<K>> {
        self.reader.state()
    }
}

impl<K: Resource + 'static> Drop for Watched<K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}
