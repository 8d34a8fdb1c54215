//! Watches through kube-runtime: watcher, reflector, and relisting after 410 Gone.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ObjectMeta, PostParams, WatchEvent, WatchParams},
    runtime::{
        WatchStreamExt, reflector,
        watcher::{self, Event},
    },
};

use crate::harness::{DEADLINE, ROOT_CA, cm, start, start_with, within};
use gpustack_tests::wait::until;

/// Next event whose kind `pick` accepts, skipping the rest.
async fn next_matching<S, T>(
    stream: &mut S,
    what: &str,
    mut pick: impl FnMut(&Event<ConfigMap>) -> Option<T>,
) -> T
where
    S: futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Unpin,
{
    within(what, async {
        loop {
            let ev = stream
                .next()
                .await
                .expect("watch stream ended")
                .expect("watch error");
            if let Some(v) = pick(&ev) {
                return v;
            }
        }
    })
    .await
}

#[tokio::test]
async fn watcher_reaches_init_done_then_sees_every_change() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    let mut initial = Vec::new();
    next_matching(&mut stream, "InitDone", |e| match e {
        Event::InitApply(o) => {
            initial.push(o.name_any());
            None
        }
        Event::InitDone => Some(()),
        _ => None,
    })
    .await;
    assert_eq!(initial, vec!["before", ROOT_CA]);

    api.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    let name = next_matching(&mut stream, "Apply(after)", |e| match e {
        Event::Apply(o) => Some(o.name_any()),
        _ => None,
    })
    .await;
    assert_eq!(name, "after");
    api.delete("before", &DeleteParams::default())
        .await
        .unwrap();
    let name = next_matching(&mut stream, "Delete(before)", |e| match e {
        Event::Delete(o) => Some(o.name_any()),
        _ => None,
    })
    .await;
    assert_eq!(name, "before");
}

#[tokio::test]
async fn reflector_store_follows_the_cluster() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.create(&PostParams::default(), &cm("one"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(api.clone(), watcher::Config::default()),
    );
    let driver = tokio::spawn(stream.applied_objects().try_for_each(|_| async { Ok(()) }));
    within("reflector ready", reader.wait_until_ready())
        .await
        .unwrap();
    assert_eq!(reader.state().len(), 2, "one, and the namespace's CA");
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("n{i}")))
            .await
            .unwrap();
    }
    api.delete("one", &DeleteParams::default()).await.unwrap();
    until(
        "store has the 5 new objects and the CA only",
        DEADLINE,
        || {
            let mut names: Vec<String> = reader.state().iter().map(|o| o.name_any()).collect();
            names.sort();
            async move { (names == [ROOT_CA, "n0", "n1", "n2", "n3", "n4"]).then_some(()) }
        },
    )
    .await;
    driver.abort();
}

#[tokio::test]
async fn watch_from_a_compacted_version_gets_410_and_the_watcher_relists() {
    let h = start_with(|o| o.api.bookmark_interval = Duration::from_secs(3600)).await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    next_matching(&mut stream, "first InitDone", |e| {
        matches!(e, Event::InitDone).then_some(())
    })
    .await;
    let stale_rv = api.get("a").await.unwrap().resource_version().unwrap();

    // Move the log on (in another resource), compact it, and drop every open watch: the
    // watcher resumes from its last version, which is now too old.
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    for i in 0..3 {
        secrets
            .create(
                &PostParams::default(),
                &Secret {
                    metadata: ObjectMeta {
                        name: Some(format!("s{i}")),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    h.gateway.store().compact(0).await.unwrap();

    // A plain watch from the stale version: an ERROR event with 410 Expired.
    let mut raw = api
        .watch(&WatchParams::default(), &stale_rv)
        .await
        .unwrap()
        .boxed();
    let first = within("410 event", raw.try_next())
        .await
        .unwrap()
        .expect("an event");
    match first {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }

    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    h.gateway.store().compact(0).await.unwrap();
    h.gateway.store().end_watches();
    // The watcher reports the 410, then relists: Init .. InitDone with both objects.
    let mut saw_gone = false;
    let mut relisted = Vec::new();
    let mut in_relist = false;
    within("relist after 410", async {
        loop {
            match stream.next().await.expect("watch stream ended") {
                Err(watcher::Error::WatchError(s)) if s.code == 410 => saw_gone = true,
                Err(e) => panic!("unexpected watcher error {e}"),
                Ok(Event::Init) => in_relist = true,
                Ok(Event::InitApply(o)) if in_relist => relisted.push(o.name_any()),
                Ok(Event::InitDone) if in_relist => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(saw_gone, "the watcher never saw 410 Gone");
    relisted.sort();
    assert_eq!(relisted, vec!["a", "b", ROOT_CA]);
}

#[tokio::test]
async fn watches_get_bookmarks_and_streaming_lists_end_with_the_initial_events_marker() {
    let h = start_with(|o| o.api.bookmark_interval = Duration::from_millis(100)).await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let created = api.create(&PostParams::default(), &cm("x")).await.unwrap();
    let rv = created.resource_version().unwrap();
    let mut raw = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    let bookmark_rv = within("a bookmark", async {
        loop {
            if let WatchEvent::Bookmark(b) = raw.try_next().await.unwrap().expect("an event") {
                return b.metadata.resource_version;
            }
        }
    })
    .await;
    assert!(bookmark_rv.parse::<u64>().unwrap() >= rv.parse::<u64>().unwrap());

    // kube's streaming-list watcher (sendInitialEvents=true) reaches InitDone with the objects.
    let mut stream =
        watcher::watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    next_matching(&mut stream, "streaming InitDone", |e| match e {
        Event::InitApply(o) => {
            initial.push(o.name_any());
            None
        }
        Event::InitDone => Some(()),
        _ => None,
    })
    .await;
    assert_eq!(initial, vec![ROOT_CA, "x"]);
    api.create(&PostParams::default(), &cm("y")).await.unwrap();
    let name = next_matching(&mut stream, "Apply(y)", |e| match e {
        Event::Apply(o) => Some(o.name_any()),
        _ => None,
    })
    .await;
    assert_eq!(name, "y");
}

#[tokio::test]
async fn label_selector_watches_see_objects_enter_and_leave() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let mut stream =
        watcher::watcher(api.clone(), watcher::Config::default().labels("team=a")).boxed();
    next_matching(&mut stream, "InitDone", |e| {
        matches!(e, Event::InitDone).then_some(())
    })
    .await;
    api.create(&PostParams::default(), &cm("m")).await.unwrap();
    let pp = kube::api::PatchParams::default();
    api.patch(
        "m",
        &pp,
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .unwrap();
    let entered = next_matching(&mut stream, "object entering the selection", |e| match e {
        Event::Apply(o) => Some(o.name_any()),
        _ => None,
    })
    .await;
    assert_eq!(entered, "m");
    api.patch(
        "m",
        &pp,
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "b"}}})),
    )
    .await
    .unwrap();
    let left = next_matching(&mut stream, "object leaving the selection", |e| match e {
        Event::Delete(o) => Some(o.name_any()),
        _ => None,
    })
    .await;
    assert_eq!(left, "m");
}

#[tokio::test]
async fn a_watcher_reconnects_across_a_gateway_restart() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    next_matching(&mut stream, "InitDone", |e| {
        matches!(e, Event::InitDone).then_some(())
    })
    .await;

    // Same data directory, same port: the kubeconfig, token and CA stay valid.
    let h = h.restart().await;
    api.create(&PostParams::default(), &cm("after-restart"))
        .await
        .expect("writes reach the restarted gateway");
    // The watcher resumes (from its version, or by relisting) and sees the new object.
    within("the watcher to see the new object", async {
        loop {
            match stream.next().await.expect("watch stream ended") {
                Ok(Event::Apply(o)) | Ok(Event::InitApply(o))
                    if o.name_any() == "after-restart" =>
                {
                    break;
                }
                _ => {}
            }
        }
    })
    .await;
    assert_eq!(api.get("before").await.unwrap().name_any(), "before");
    h.gateway.shutdown().await;
}

#[tokio::test]
async fn metadata_only_gets_lists_and_watchers() {
    use kube::core::PartialObjectMeta;
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    api.create(&PostParams::default(), &cm("m1")).await.unwrap();
    let meta = api.get_metadata("m1").await.unwrap();
    assert_eq!(meta.metadata.name.as_deref(), Some("m1"));
    let list = api
        .list_metadata(&kube::api::ListParams::default())
        .await
        .unwrap();
    assert_eq!(list.items.len(), 2, "m1, and the namespace's CA");
    assert!(list.metadata.resource_version.is_some());

    // kube's PartialObjectMeta would accept whole objects too, so the wire form is checked
    // as served: the metadata kinds, and no `data` (or `spec`) of the ConfigMap.
    const ACCEPT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    const BASE: &str = "/api/v1/namespaces/default/configmaps";
    let get = |uri: String| {
        let client = h.client.clone();
        async move {
            let req = http::Request::get(uri)
                .header(http::header::ACCEPT, ACCEPT)
                .body(Vec::new())
                .unwrap();
            let text = client.request_text(req).await.unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        }
    };
    let assert_partial = |o: &serde_json::Value| {
        assert_eq!(o["kind"], "PartialObjectMetadata", "{o}");
        assert_eq!(o["apiVersion"], "meta.k8s.io/v1", "{o}");
        assert!(o.get("data").is_none() && o.get("spec").is_none(), "{o}");
        assert!(o["metadata"]["name"].is_string(), "{o}");
    };
    assert_partial(&get(format!("{BASE}/m1")).await);
    let listed = get(BASE.to_owned()).await;
    assert_eq!(listed["kind"], "PartialObjectMetadataList", "{listed}");
    assert_eq!(listed["apiVersion"], "meta.k8s.io/v1", "{listed}");
    assert_partial(&listed["items"][0]);
    let from = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let raw_watch = http::Request::get(format!(
        "{BASE}?watch=1&resourceVersion={from}&timeoutSeconds=30"
    ))
    .header(http::header::ACCEPT, ACCEPT)
    .body(Vec::new())
    .unwrap();
    let mut raw_events = h
        .client
        .request_events::<kube::core::DynamicObject>(raw_watch)
        .await
        .unwrap()
        .boxed();

    let meta_api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(h.client.clone(), "default");
    let mut stream = watcher::watcher(meta_api, watcher::Config::default()).boxed();
    within("metadata InitDone", async {
        loop {
            if let Event::InitDone = stream.try_next().await.unwrap().unwrap() {
                break;
            }
        }
    })
    .await;
    api.create(&PostParams::default(), &cm("m2")).await.unwrap();
    let name = within("metadata Apply(m2)", async {
        loop {
            if let Event::Apply(o) = stream.try_next().await.unwrap().unwrap() {
                break o.name_any();
            }
        }
    })
    .await;
    assert_eq!(name, "m2");
    let added = within("raw metadata ADDED m2", async {
        loop {
            if let WatchEvent::Added(o) = raw_events.try_next().await.unwrap().unwrap() {
                break o;
            }
        }
    })
    .await;
    assert_eq!(added.name_any(), "m2");
    let types = added.types.clone().unwrap_or_default();
    assert_eq!(
        (types.kind.as_str(), types.api_version.as_str()),
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    );
    assert!(
        added.data.get("data").is_none() && added.data.get("spec").is_none(),
        "{:?}",
        added.data
    );
}
