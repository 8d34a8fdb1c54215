//! CRUD, patches, status, finalizers and pagination through `kube::Api`.

use std::collections::BTreeMap;

use gpustack_api::devices::Devices;
use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use crate::harness::{DEADLINE, ROOT_CA, start};
use gpustack_tests::wait::until;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        ..Default::default()
    }
}

fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected a Status error, got {other:?}"),
    }
}

pub async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in gpustack_api::crds::all() {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating a CRD: {e}"),
        }
    }
    let devices: Api<Devices> = Api::all(client.clone());
    until("Devices served", DEADLINE, || {
        let devices = devices.clone();
        async move { devices.list(&ListParams::default()).await.ok() }
    })
    .await;
}

#[tokio::test]
async fn configmap_crud_conflicts_and_selectors() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let pp = PostParams::default();

    let created = api.create(&pp, &cm("a", &[("app", "web")])).await.unwrap();
    let rv1: u64 = created
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(
        api_error(api.create(&pp, &cm("a", &[])).await.unwrap_err()),
        (409, "AlreadyExists".into())
    );
    api.create(&pp, &cm("b", &[("app", "db")])).await.unwrap();
    let generated = api
        .create(
            &pp,
            &ConfigMap {
                metadata: ObjectMeta {
                    generate_name: Some("gen-".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let gen_name = generated.metadata.name.unwrap();
    assert!(
        gen_name.starts_with("gen-") && gen_name.len() == 9,
        "{gen_name}"
    );

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["k"], "v");

    // Replace with the current version works and moves the version on; the old one is stale.
    let mut changed = got.clone();
    changed.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let replaced = api.replace("a", &pp, &changed).await.unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    assert_eq!(
        api_error(api.replace("a", &pp, &changed).await.unwrap_err()),
        (409, "Conflict".into())
    );

    // Merge, JSON and apply patches.
    let p = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"m": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.data.as_ref().unwrap()["m"], "1");
    let p = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "add", "path": "/data/j", "value": "2"}]))
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.data.as_ref().unwrap()["j"], "2");
    let ssa = PatchParams::apply("test").force();
    let applied = api
        .patch("c", &ssa, &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1"}})))
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["x"], "1");
    let applied = api
        .patch("c", &ssa, &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"y": "2"}})))
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["y"], "2");

    // Selectors.
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
        ),
        vec!["a"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app in (web,db)"))
                .await
                .unwrap()
        ),
        vec!["a", "b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app,app!=web"))
                .await
                .unwrap()
        ),
        vec!["b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("!app"))
                .await
                .unwrap()
        ),
        vec!["c", gen_name.as_str(), ROOT_CA]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        vec!["b"]
    );

    // Delete, then it is gone.
    api.delete("b", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        api_error(api.get("b").await.unwrap_err()),
        (404, "NotFound".into())
    );
    assert_eq!(
        api_error(api.delete("b", &DeleteParams::default()).await.unwrap_err()),
        (404, "NotFound".into())
    );
}

#[tokio::test]
async fn namespaces_must_exist_and_take_their_objects_along() {
    let h = start().await;
    let missing: Api<ConfigMap> = Api::namespaced(h.client.clone(), "nowhere");
    let e = api_error(
        missing
            .create(&PostParams::default(), &cm("x", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(e, (404, "NotFound".into()));

    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some("team".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "team");
    api.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    // As on kube-apiserver, the namespace is emptied after the delete answers, then goes.
    until("team emptied and gone", DEADLINE, || {
        let (api, namespaces) = (api.clone(), namespaces.clone());
        async move {
            let empty = api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty();
            let gone = namespaces.get_opt("team").await.unwrap().is_none();
            (empty && gone).then_some(())
        }
    })
    .await;
    assert_eq!(api_error(namespaces.get("team").await.unwrap_err()).0, 404);

    // An object with a finalizer keeps its namespace Terminating until the finalizer goes.
    let ns = |name: &str| Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns("held"))
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "held");
    let mut pinned = cm("pinned", &[]);
    pinned.metadata.finalizers = Some(vec!["gpustack.ai/hold".into()]);
    api.create(&PostParams::default(), &pinned).await.unwrap();
    api.create(&PostParams::default(), &cm("plain", &[]))
        .await
        .unwrap();
    namespaces
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get("held").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    until("plain deleted with its namespace", DEADLINE, || {
        let api = api.clone();
        async move { api.get_opt("plain").await.unwrap().is_none().then_some(()) }
    })
    .await;
    assert!(
        api.get("pinned")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let refused = api
        .create(&PostParams::default(), &cm("new", &[]))
        .await
        .unwrap_err();
    assert_eq!(api_error(refused), (403, "Forbidden".into()));
    api.patch(
        "pinned",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("pinned").await.unwrap_err()).0, 404);
    assert_eq!(api_error(namespaces.get("held").await.unwrap_err()).0, 404);
}

#[tokio::test]
async fn pagination_returns_every_object_once() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    for i in 0..7 {
        api.create(
            &PostParams::default(),
            &cm(&format!("p{i}"), &[("page", "yes")]),
        )
        .await
        .unwrap();
    }
    api.create(&PostParams::default(), &cm("other", &[]))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut lp = ListParams::default().labels("page=yes").limit(3);
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        seen.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(seen, (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>());
    assert_eq!(pages, 3);

    // Without selectors (objects served verbatim): 9 objects (with the namespace's CA) in
    // pages of 3.
    let mut all = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut rvs = Vec::new();
    loop {
        let page = api.list(&lp).await.unwrap();
        rvs.push(page.metadata.resource_version.clone());
        all.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(all.len(), 9);
    assert_eq!(all[8], "p6");
    assert_eq!(rvs.len(), 3);
    assert!(
        rvs.windows(2).all(|w| w[0] == w[1]),
        "every page carries the first page's version: {rvs:?}"
    );
}

#[tokio::test]
async fn devices_crd_crud_status_generation_and_finalizers() {
    let h = start().await;
    install_crds(&h.client).await;
    let api: Api<Devices> = Api::all(h.client.clone());
    let mut d = Devices::new("node-1", Default::default());
    d.metadata.finalizers = Some(vec!["gpustack.ai/test".into()]);
    let created = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    // Status goes through /status only; the main endpoint ignores it, /status ignores spec.
    let status = json!({"status": {"groups": [{"id": "h100", "manufacturer": "nvidia", "accelerators": []}]}});
    let p = api
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(status.clone()),
        )
        .await
        .unwrap();
    assert!(p.status.is_none());
    let p = api
        .patch_status("node-1", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().groups[0].id, "h100");
    assert_eq!(p.metadata.generation, Some(1));
    let p = api
        .patch_status(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"l": "1"}}, "spec": {"extra": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(1));
    let raw: Api<kube::api::DynamicObject> = Api::all_with(
        h.client.clone(),
        &kube::api::ApiResource::erase::<Devices>(&()),
    );
    assert!(
        raw.get("node-1").await.unwrap().data["spec"]
            .get("extra")
            .is_none()
    );

    // Labels do not move generation; spec does.
    let p = api
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(1));
    // A field the CRD's schema does not know is pruned: no change, no new generation.
    let p = api
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"extra": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(1));
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..Default::default()
    };
    let e = api
        .patch(
            "node-1",
            &strict,
            &Patch::Merge(json!({"spec": {"extra": 2}})),
        )
        .await
        .unwrap_err();
    let (code, _) = api_error(e);
    assert_eq!(code, 400);
    // A real spec change moves generation.
    let group = json!({"id": "h100", "manufacturer": "nvidia", "name": "H100", "memory": 81920, "accelerators": []});
    let p = raw
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"groups": [group]}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    assert_eq!(p.data["spec"]["groups"][0]["id"], "h100");
    let p = raw
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"groups": null}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(3));

    // Delete with a finalizer pending only marks; removing the finalizer deletes.
    api.delete("node-1", &DeleteParams::default())
        .await
        .unwrap();
    let marked = api.get("node-1").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    api.patch(
        "node-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        api_error(api.get("node-1").await.unwrap_err()),
        (404, "NotFound".into())
    );

    // Deleting the CRD removes the kind and its objects.
    api.create(
        &PostParams::default(),
        &Devices::new("node-2", Default::default()),
    )
    .await
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.delete("devices.worker.gpustack.ai", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        api_error(api.list(&ListParams::default()).await.unwrap_err()).0,
        404
    );
    install_crds(&h.client).await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn dry_run_writes_nothing_and_delete_collection_honours_selectors() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let would = api.create(&dry, &cm("dry", &[])).await.unwrap();
    assert_eq!(would.metadata.name.as_deref(), Some("dry"));
    assert_eq!(api_error(api.get("dry").await.unwrap_err()).0, 404);

    for (name, app) in [("d1", "x"), ("d2", "x"), ("d3", "y")] {
        api.create(&PostParams::default(), &cm(name, &[("app", app)]))
            .await
            .unwrap();
    }
    let deleted = api
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=x"),
        )
        .await
        .unwrap();
    let names: Vec<String> = deleted
        .left()
        .expect("a list of deleted objects")
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(names, vec!["d1", "d2"]);
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["d3", ROOT_CA]);

    let e = api
        .patch(
            "d3",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"a": "b"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (409, "Conflict".into()));
    let bad = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..Default::default()
    };
    api.patch("d3", &bad, &Patch::Merge(json!({"data": {"a": "b"}})))
        .await
        .expect("fieldValidation=Strict is accepted");
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let owner =
        |name: &str, uid: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: name.into(),
            uid: uid.into(),
            ..Default::default()
        };
    let child = |name: &str, parent: &ConfigMap| {
        let mut c = cm(name, &[]);
        c.metadata.owner_references = Some(vec![owner(
            parent.metadata.name.as_deref().unwrap(),
            parent.metadata.uid.as_deref().unwrap(),
        )]);
        c
    };
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let pp = PostParams::default();

    // Background (the default): the owner goes, then its dependents, recursively.
    let root = api.create(&pp, &cm("root", &[])).await.unwrap();
    let mid = api.create(&pp, &child("mid", &root)).await.unwrap();
    api.create(&pp, &child("leaf", &mid)).await.unwrap();
    api.create(&pp, &cm("bystander", &[])).await.unwrap();
    api.delete("root", &DeleteParams::background())
        .await
        .unwrap();
    // The collector works after the delete has answered, as kube's does.
    until("root's dependents collected", DEADLINE, || {
        let api = api.clone();
        async move {
            let left = names(api.list(&ListParams::default()).await.unwrap());
            (left == ["bystander", ROOT_CA]).then_some(())
        }
    })
    .await;

    // Orphan: dependents stay, without the owner reference.
    let root = api.create(&pp, &cm("root2", &[])).await.unwrap();
    api.create(&pp, &child("kept", &root)).await.unwrap();
    api.delete("root2", &DeleteParams::orphan()).await.unwrap();
    let kept = api.get("kept").await.unwrap();
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );

    // Foreground: the collector deletes the dependents in the background; a dependent with a
    // finalizer (and no blockOwnerDeletion) is only marked and does not hold the owner.
    let root = api.create(&pp, &cm("root3", &[])).await.unwrap();
    let mut held = child("held", &root);
    held.metadata.finalizers = Some(vec!["gpustack.ai/hold".into()]);
    api.create(&pp, &held).await.unwrap();
    api.create(&pp, &child("gone", &root)).await.unwrap();
    api.delete("root3", &DeleteParams::foreground())
        .await
        .unwrap();
    let gone = |name: &'static str| {
        let api = api.clone();
        async move { api.get_opt(name).await.unwrap().is_none().then_some(()) }
    };
    until("gone deleted", DEADLINE, || gone("gone")).await;
    until("root3 deleted", DEADLINE, || gone("root3")).await;
    assert!(
        api.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
}

#[tokio::test]
async fn events_recorded_through_events_k8s_io_are_core_events_too() {
    use k8s_openapi::api::{core::v1::Event as CoreEvent, events::v1::Event as EventsV1};
    use kube::{
        Resource,
        runtime::events::{Event, EventType, Recorder, Reporter},
    };
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let target = api
        .create(&PostParams::default(), &cm("watched", &[]))
        .await
        .unwrap();
    let recorder = Recorder::new(
        h.client.clone(),
        Reporter {
            controller: "gpustack-test".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Checked".into(),
        note: Some("all good".into()),
        action: "Check".into(),
        secondary: None,
    };
    let reference = target.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    // What `kubectl describe` asks for: core Events by involvedObject.
    let core: Api<CoreEvent> = Api::namespaced(h.client.clone(), "default");
    let found = core
        .list(
            &ListParams::default()
                .fields("involvedObject.name=watched,involvedObject.kind=ConfigMap"),
        )
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let e = &found.items[0];
    assert_eq!(e.message.as_deref(), Some("all good"));
    assert_eq!(e.reason.as_deref(), Some("Checked"));
    // The repeat is the series' (the core form has it too); `count` is the deprecated field,
    // which kube-runtime leaves unset.
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));
    assert_eq!(e.count, None);
    assert_eq!(e.reporting_component.as_deref(), Some("gpustack-test"));

    let v1: Api<EventsV1> = Api::namespaced(h.client.clone(), "default");
    let found = v1
        .list(&ListParams::default().fields("regarding.name=watched"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    assert_eq!(found.items[0].note.as_deref(), Some("all good"));
    assert_eq!(
        found.items[0]
            .regarding
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("watched")
    );
}

#[tokio::test]
async fn pages_after_the_first_show_the_first_page_snapshot() {
    let h = start().await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let pp = PostParams::default();
    // Once served verbatim (no selector), once filtered (label selector).
    for (prefix, selector) in [("a", None), ("b", Some("set=b"))] {
        let mut p3_rv = None;
        for i in 0..6 {
            let c = api
                .create(&pp, &cm(&format!("{prefix}{i}"), &[("set", prefix)]))
                .await
                .unwrap();
            if i == 3 {
                p3_rv = c.metadata.resource_version;
            }
        }
        let lp = match selector {
            Some(s) => ListParams::default().limit(2).labels(s),
            None => ListParams::default().limit(2),
        };
        let first = api.list(&lp).await.unwrap();
        let token = first.metadata.continue_.clone().expect("more pages");
        // Change the collection after the first page.
        let name = |i: &str| format!("{prefix}{i}");
        api.patch(
            &name("3"),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"changed": "yes"}})),
        )
        .await
        .unwrap();
        api.delete(&name("4"), &DeleteParams::default())
            .await
            .unwrap();
        api.create(&pp, &cm(&name("2x"), &[("set", prefix)]))
            .await
            .unwrap();

        let mut names: Vec<String> = first
            .items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        let mut lp = lp.continue_token(&token);
        loop {
            let page = api.list(&lp).await.unwrap();
            assert_eq!(
                page.metadata.resource_version,
                first.metadata.resource_version
            );
            for c in &page.items {
                if c.metadata.name.as_deref() == Some(name("3").as_str()) {
                    assert_eq!(
                        c.metadata.resource_version, p3_rv,
                        "the changed object as it was"
                    );
                    assert!(!c.data.as_ref().unwrap().contains_key("changed"));
                }
                names.push(c.metadata.name.clone().unwrap());
            }
            match page.metadata.continue_ {
                Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
                _ => break,
            }
        }
        // Objects of round "a" exist when round "b" lists without a selector: only compare ours.
        names.retain(|n| n.starts_with(prefix));
        let expected: Vec<String> = ["0", "1", "2", "3", "4", "5"]
            .iter()
            .map(|i| name(i))
            .collect();
        assert_eq!(names, expected, "selector {selector:?}");
    }

    // A token older than the compacted log is refused with 410 Expired.
    let first = api.list(&ListParams::default().limit(1)).await.unwrap();
    let token = first.metadata.continue_.unwrap();
    api.create(&pp, &cm("later", &[])).await.unwrap();
    h.gateway.store().compact(0).await.unwrap();
    let e = api
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap_err();
    assert_eq!(api_error(e), (410, "Expired".into()));
}

#[tokio::test]
async fn server_side_apply_tracks_each_managers_fields() {
    let h = start().await;
    install_crds(&h.client).await;
    let api: Api<Devices> = Api::all(h.client.clone());
    let raw: Api<kube::api::DynamicObject> = Api::all_with(
        h.client.clone(),
        &kube::api::ApiResource::erase::<Devices>(&()),
    );
    let ssa = |m: &str| PatchParams::apply(m).force();
    let config = |labels: serde_json::Value| json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "metadata": {"name": "n", "labels": labels}, "spec": {}});
    api.patch(
        "n",
        &ssa("a"),
        &Patch::Apply(config(json!({"x": "1", "y": "1"}))),
    )
    .await
    .unwrap();
    api.patch("n", &ssa("b"), &Patch::Apply(config(json!({"z": "1"}))))
        .await
        .unwrap();
    // Manager "a" stops applying label "y": it goes; "b"'s label stays.
    let d = api
        .patch("n", &ssa("a"), &Patch::Apply(config(json!({"x": "2"}))))
        .await
        .unwrap();
    let labels = d.metadata.labels.unwrap();
    assert_eq!(labels.get("x").map(String::as_str), Some("2"));
    assert!(!labels.contains_key("y"));
    assert_eq!(labels.get("z").map(String::as_str), Some("1"));
    let managers: Vec<String> = d
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    let mut managers = managers;
    managers.sort();
    assert_eq!(managers, vec!["a", "b"]);

    // Status through /status, as controllers do: what the controller stops applying goes. Both
    // are fields the Devices status schema keeps (pruned ones would vanish whatever apply did):
    // a second group (a keyed list entry) and an accelerator's `remaining`.
    let first = json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "status": {"groups": [
        {"id": "g", "manufacturer": "nvidia", "accelerators": [{"id": "a", "remaining": 3}]},
        {"id": "h", "manufacturer": "nvidia", "accelerators": []},
    ]}});
    let d = raw
        .patch_status("n", &ssa("ctrl"), &Patch::Apply(first))
        .await
        .unwrap();
    assert_eq!(
        d.data["status"]["groups"][1]["id"], "h",
        "{}",
        d.data["status"]
    );
    assert_eq!(
        d.data["status"]["groups"][0]["accelerators"][0]["remaining"], 3,
        "{}",
        d.data["status"]
    );
    // A second manager's group: `groups` is a map list keyed by `id` in the schema, so each
    // manager's applies touch only their own entries.
    let other = json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "status": {"groups": [
        {"id": "o", "manufacturer": "amd", "accelerators": []},
    ]}});
    let d = raw
        .patch_status("n", &ssa("other"), &Patch::Apply(other))
        .await
        .unwrap();
    let ids: Vec<&Value> = d.data["status"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["id"])
        .collect();
    assert_eq!(ids, [&json!("g"), &json!("h"), &json!("o")]);
    let applied = || {
        json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "status": {"groups": [
            {"id": "g", "manufacturer": "nvidia", "accelerators": [{"id": "a"}]},
        ]}})
    };
    let d = raw
        .patch_status("n", &ssa("ctrl"), &Patch::Apply(applied()))
        .await
        .unwrap();
    let groups = d.data["status"]["groups"].as_array().unwrap();
    // "h" goes (ctrl applied it and no longer does); "o" stays (another manager's).
    assert_eq!(groups.len(), 2, "{}", d.data["status"]);
    assert_eq!(groups[0]["id"], "g");
    assert_eq!(groups[1]["id"], "o", "{}", d.data["status"]);
    assert_eq!(groups[0]["accelerators"][0]["id"], "a");
    // Released by "ctrl", `remaining` is back to the schema's default.
    assert_eq!(
        groups[0]["accelerators"][0]["remaining"], 0,
        "{}",
        d.data["status"]
    );
    // Re-applying the same configuration writes nothing.
    let rv = d.metadata.resource_version.clone();
    let again = raw
        .patch_status("n", &ssa("ctrl"), &Patch::Apply(applied()))
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version, rv);
}
