//! Where mounts find `ModelArtifact`s: a cluster-wide watch cache (one list, then a watch), so a
//! mount reads memory, not the API server. Until the first list has arrived the cache says it
//! is not synced and mounts answer `Unavailable`.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use futures::StreamExt;
use gpustack_api::model_artifact::ModelArtifact;
use kube::runtime::{
    WatchStreamExt,
    reflector::{self, ObjectRef},
    watcher,
};
use tokio::sync::watch;

use crate::csi::{ArtifactLookup, LookupError};

/// The watch cache of every namespace's ModelArtifacts.
pub struct WatchedArtifacts {
    reader: reflector::Store<ModelArtifact>,
    synced: Arc<AtomicBool>,
}

impl WatchedArtifacts {
    /// Starts the watch; it runs until `stop` turns true.
    pub fn start(client: kube::Client, mut stop: watch::Receiver<bool>) -> Arc<Self> {
        let (reader, writer) = reflector::store();
        let synced = Arc::new(AtomicBool::new(false));
        let events = reflector::reflector(
            writer,
            gpustack_watch::objects::<ModelArtifact>(client, None, watcher::Config::default())
                .default_backoff(),
        );
        let flag = Arc::clone(&synced);
        tokio::spawn(async move {
            let mut events = events.boxed();
            loop {
                tokio::select! {
                    ev = events.next() => match ev {
                        Some(Ok(watcher::Event::InitDone)) => flag.store(true, Ordering::Relaxed),
                        Some(Ok(_)) => {}
                        Some(Err(e)) => tracing::warn!("watching ModelArtifacts: {e}"),
                        None => return,
                    },
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        });
        Arc::new(Self { reader, synced })
    }
}

#[tonic::async_trait]
impl ArtifactLookup for WatchedArtifacts {
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<ModelArtifact>, LookupError> {
        if !self.ready() {
            return Err(LookupError::NotSynced);
        }
        let key = ObjectRef::new(name).within(namespace);
        Ok(self.reader.get(&key).map(|a| (*a).clone()))
    }

    fn ready(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }
}
