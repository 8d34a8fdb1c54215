//! Watching a kind as its typed form without letting one object stop the watch. kube's typed
//! watcher decodes a whole list page at once: a single object our types cannot read (a field of
//! another type in a newer Kueue, a value written past an older schema) fails the list, and the
//! controllers would see nothing of that kind, retrying forever. Here each object is decoded on
//! its own; one that cannot be is skipped with a warning that names it, and the rest flow on.

use futures::{Stream, StreamExt, future};
use kube::{
    Api, Client, Resource, ResourceExt,
    core::{ApiResource, DynamicObject},
    runtime::watcher::{self, Event},
};
use serde::de::DeserializeOwned;

/// The events of every `K` in the cluster, typed; objects that do not decode are left out.
pub fn watch_all<K>(
    client: Client,
    config: watcher::Config,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug + Send + 'static,
{
    let api: Api<DynamicObject> = Api::all_with(client, &ApiResource::erase::<K>(&()));
    watcher::watcher(api, config).filter_map(|ev| {
        future::ready(match ev {
            Ok(ev) => typed(ev).map(Ok),
            Err(e) => Some(Err(e)),
        })
    })
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
    // typed calls already decode each kind from text, so this shares their decoders instead of
    // compiling every kind's a second time (serde's code is most of the worker's build).
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

    fn dynamic(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn one_unreadable_object_is_skipped_and_the_others_pass() {
        let good = dynamic(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "a", "namespace": "n"}, "spec": {"clusterQueue": "cq"}}),
        );
        let bad = dynamic(
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
