#![warn(missing_docs)]
//! Watching a kind as its typed form, for every component that follows the cluster (the
//! worker's controllers and API, the node agents).
//!
//! Two reasons to watch this way rather than with kube's typed watcher:
//! - **One object does not stop the watch.** kube's typed watcher decodes a whole list page at
//!   once: a single object our types cannot read (a field of another type in a newer Kueue, a
//!   value written past an older schema) fails the list, and the caller would see nothing of
//!   that kind, retrying forever. Here each object is decoded on its own; one that cannot be is
//!   skipped with a warning that names it, and the rest flow on.
//! - **The build.** kube's watcher is generic over the kind, and its state machine and the
//!   serde code of its watch events (each kind decoded once more through serde's buffered
//!   content) were compiled again for every kind in every crate that watched it. Here the
//!   watcher is instantiated once, for [`DynamicObject`], in this crate ([`dynamic`]); each kind
//!   is decoded from text, as kube's typed calls already decode it, so no second decoder is
//!   compiled per kind (issue 41: a tenth of the device-manager's code).

use futures::{Stream, StreamExt, future, stream::BoxStream};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::{ApiResource, DynamicObject},
    runtime::watcher::{self, Event},
};
use serde::de::DeserializeOwned;

/// The events of every `K` that `config` selects, in `namespace` or in every namespace
/// (`None`), typed; objects that do not decode are left out.
pub fn objects<K>(
    client: Client,
    namespace: Option<&str>,
    config: watcher::Config,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + 'static,
{
    let resource = ApiResource::erase::<K>(&());
    let api = match namespace {
        Some(ns) => Api::namespaced_with(client, ns, &resource),
        None => Api::all_with(client, &resource),
    };
    dynamic(api, config).filter_map(|ev| {
        future::ready(match ev {
            Ok(ev) => typed(ev).map(Ok),
            Err(e) => Some(Err(e)),
        })
    })
}

/// kube's watcher over `api`, untyped. Not generic, so compiled once, here.
pub fn dynamic(
    api: Api<DynamicObject>,
    config: watcher::Config,
) -> BoxStream<'static, Result<Event<DynamicObject>, watcher::Error>> {
    watcher::watcher(api, config).boxed()
}

/// The typed event, or nothing when its object does not decode.
fn typed<K>(ev: Event<DynamicObject>) -> Option<Event<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    match ev {
        Event::Apply(o) => decoded(o).map(Event::Apply),
        Event::InitApply(o) => decoded(o).map(Event::InitApply),
        // An object that never decoded was never seen: its deletion changes nothing.
        Event::Delete(o) => decoded(o).map(Event::Delete),
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
    }
}

fn decoded<K>(o: DynamicObject) -> Option<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let (namespace, name) = (o.namespace(), o.name_any());
    // From text rather than through `DynamicObject::try_parse`'s `serde_json::Value`: kube's
    // typed calls already decode each kind from text, so this shares their decoders.
    let decoded = serde_json::to_string(&o).and_then(|text| serde_json::from_str::<K>(&text));
    match decoded {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!(
                kind = %K::kind(&()),
                namespace = namespace.as_deref().unwrap_or(""),
                name,
                error = %e,
                "skipping an object that cannot be read as its kind"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpustack_api::kueue::LocalQueue;
    use serde_json::json;

    fn object(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn one_unreadable_object_is_skipped_and_the_others_pass() {
        let good = object(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "a", "namespace": "n"}, "spec": {"clusterQueue": "cq"}}),
        );
        let bad = object(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "b", "namespace": "n"}, "spec": {"clusterQueue": {"not": "a name"}}}),
        );
        let ok = typed::<LocalQueue>(Event::InitApply(good));
        assert!(matches!(ok, Some(Event::InitApply(q)) if q.name_any() == "a"));
        assert!(typed::<LocalQueue>(Event::InitApply(bad.clone())).is_none());
        assert!(typed::<LocalQueue>(Event::Delete(bad)).is_none());
        assert!(matches!(
            typed::<LocalQueue>(Event::InitDone),
            Some(Event::InitDone)
        ));
    }
}
