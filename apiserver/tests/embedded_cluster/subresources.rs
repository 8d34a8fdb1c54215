//! Subresources clients use without a kubelet, one kube-rs test each: `scale` (built-in
//! workloads and a CRD that declares it), `pods/eviction` against PodDisruptionBudgets,
//! `pods/binding`, `serviceaccounts/token`, `pods/status` and `nodes/status`,
//! CertificateSigningRequest `approval`, core and `events.k8s.io` Events; and discovery naming
//! the kinds they take.

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, ReplicaSet, StatefulSet},
        authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec},
        certificates::v1::CertificateSigningRequest,
        core::v1::{Binding, Event, Node, Pod, ServiceAccount},
        policy::v1::PodDisruptionBudget,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, Config,
    api::{
        ApiResource, DynamicObject, EvictParams, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams,
    },
    config::{KubeConfigOptions, Kubeconfig},
    core::Status,
};
use serde_json::{Value, json};

use crate::harness::{DEADLINE, start};
use gpustack_tests::wait::until;

fn api_error(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected a Status error, got {other:?}"),
    }
}

fn object<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

/// A workload of `kind` selecting `app: NAME`.
fn workload<T: serde::de::DeserializeOwned>(kind: &str, name: &str, replicas: i32) -> T {
    object(json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
}

#[tokio::test]
async fn scale_reads_and_writes_the_replicas_of_builtin_workloads() {
    let h = start().await;
    let pp = PostParams::default();
    let deployments: Api<Deployment> = Api::namespaced(h.client.clone(), "default");
    deployments
        .create(&pp, &workload("Deployment", "web", 2))
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(
        scale.status.as_ref().unwrap().selector.as_deref(),
        Some("app=web")
    );
    let patched = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(5));
    let d = deployments.get("web").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(5));
    assert_eq!(d.metadata.generation, Some(2));

    // A replace at the Scale's resourceVersion works once; then it is stale.
    let mut current = deployments.get_scale("web").await.unwrap();
    current.spec.as_mut().unwrap().replicas = Some(1);
    let replaced = deployments
        .replace_scale("web", &pp, &current)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().replicas, Some(1));
    let (code, reason, _) = api_error(
        deployments
            .replace_scale("web", &pp, &current)
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    let (code, _, message) = api_error(
        deployments
            .patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": -1}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(message.contains("spec.replicas"), "{message}");

    let replicasets: Api<ReplicaSet> = Api::namespaced(h.client.clone(), "default");
    replicasets
        .create(&pp, &workload("ReplicaSet", "rs", 3))
        .await
        .unwrap();
    let s = replicasets
        .patch_scale(
            "rs",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(0));
    let statefulsets: Api<StatefulSet> = Api::namespaced(h.client.clone(), "default");
    statefulsets
        .create(&pp, &workload("StatefulSet", "db", 1))
        .await
        .unwrap();
    assert_eq!(
        statefulsets
            .get_scale("db")
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(1)
    );
    let (code, _, _) = api_error(deployments.get_scale("absent").await.unwrap_err());
    assert_eq!(code, 404);
}

#[tokio::test]
async fn scale_of_a_custom_kind_follows_its_crd_paths() {
    let h = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.create(
        &PostParams::default(),
        &object(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "pools.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "pools", "singular": "pool", "kind": "Pool"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                        "statusReplicasPath": ".status.ready", "labelSelectorPath": ".status.selector"}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        })),
    )
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Pool"),
        "pools",
    );
    let pools: Api<DynamicObject> = Api::namespaced_with(h.client.clone(), "default", &ar);
    until("Pools served", DEADLINE, || {
        let pools = pools.clone();
        async move { pools.list(&ListParams::default()).await.ok() }
    })
    .await;
    pools
        .create(
            &PostParams::default(),
            &object(json!({"apiVersion": "example.com/v1", "kind": "Pool",
                "metadata": {"name": "p"}, "spec": {"size": 2}})),
        )
        .await
        .unwrap();
    pools
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": 1, "selector": "pool=p"}})),
        )
        .await
        .unwrap();
    let scale = pools.get_scale("p").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let status = scale.status.unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (1, Some("pool=p"))
    );
    pools
        .patch_scale(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(pools.get("p").await.unwrap().data["spec"]["size"], 7);
}

fn pod(name: &str, labels: Value) -> Pod {
    object(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
}

/// Marks Pod `name` running and ready, as a kubelet would.
async fn run(pods: &Api<Pod>, name: &str) {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
}

/// A client of the harness's cluster that takes a 429 for an answer (kube-rs retries them by
/// default, for minutes).
async fn without_retries(kubeconfig: &std::path::Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

#[tokio::test]
async fn eviction_deletes_a_pod_unless_its_budget_is_spent() {
    let h = start().await;
    let pp = PostParams::default();
    let client = without_retries(&h.kubeconfig).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "default");

    // No budget: the Pod goes.
    pods.create(&pp, &pod("loose", json!({"app": "loose"})))
        .await
        .unwrap();
    run(&pods, "loose").await;
    let status = pods.evict("loose", &EvictParams::default()).await.unwrap();
    assert_eq!(status.code, 201);
    assert!(pods.get_opt("loose").await.unwrap().is_none());

    // One healthy Pod and a budget that needs one: refused, worked out from the Pods.
    pods.create(&pp, &pod("db-0", json!({"app": "db"})))
        .await
        .unwrap();
    run(&pods, "db-0").await;
    pdbs.create(
        &pp,
        &object(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}),
        ),
    )
    .await
    .unwrap();
    let (code, reason, message) = api_error(
        pods.evict("db-0", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((code, reason.as_str()), (429, "TooManyRequests"));
    assert!(message.contains("disruption budget"), "{message}");
    assert!(pods.get_opt("db-0").await.unwrap().is_some());

    // A controller's status allowing one disruption: the eviction counts against it.
    pdbs.patch_status(
        "db",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 1,
            "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}),
        ),
    )
    .await
    .unwrap();
    pods.evict("db-0", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("db-0").await.unwrap().is_none());
    let budget = pdbs.get("db").await.unwrap().status.unwrap();
    assert_eq!(budget.disruptions_allowed, 0);
    assert!(budget.disrupted_pods.unwrap().contains_key("db-0"));

    // The status now allows none: refused.
    pods.create(&pp, &pod("db-1", json!({"app": "db"})))
        .await
        .unwrap();
    run(&pods, "db-1").await;
    let (code, _, _) = api_error(
        pods.evict("db-1", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 429);

    let (code, _, _) = api_error(
        pods.evict("absent", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 404);
}

#[tokio::test]
async fn binding_assigns_a_pod_to_a_node_once() {
    let h = start().await;
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), "default");
    pods.create(&pp, &pod("w", json!({}))).await.unwrap();
    let binding: Binding = object(json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "w"}, "target": {"kind": "Node", "name": "node-a"}}));
    let status: Status = pods
        .create_subresource("binding", "w", &pp, &binding)
        .await
        .unwrap();
    assert_eq!(status.code, 201);
    let bound = pods.get("w").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-a"));
    let conditions = bound.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let again = pods
        .create_subresource::<_, Status>("binding", "w", &pp, &binding)
        .await
        .unwrap_err();
    let (code, _, message) = api_error(again);
    assert_eq!(code, 409);
    assert!(message.contains("node-a"), "{message}");
}

#[tokio::test]
async fn a_token_request_gives_a_token_the_cluster_accepts() {
    let h = start().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(h.client.clone(), "default");
    // Every namespace has its `default` ServiceAccount from the start.
    let issued = accounts
        .create_token_request(
            "default",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec::default(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let token = issued.status.unwrap().token;
    let kc = Kubeconfig::read_from(&h.kubeconfig).unwrap();
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.auth_info.token = Some(token.into());
    let as_account = Client::try_from(config).unwrap();
    let reviews: Api<SelfSubjectReview> = Api::all(as_account);
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    assert_eq!(
        review
            .status
            .unwrap()
            .user_info
            .unwrap()
            .username
            .as_deref(),
        Some("system:serviceaccount:default:default")
    );
}

#[tokio::test]
async fn pod_and_node_status_change_only_status() {
    let h = start().await;
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), "default");
    pods.create(&pp, &pod("s", json!({}))).await.unwrap();
    let mut p = pods.get("s").await.unwrap();
    p.status = Some(object(json!({"phase": "Running", "podIP": "10.0.0.5"})));
    p.spec.as_mut().unwrap().node_name = Some("ignored".into());
    let replaced = pods.replace_status("s", &pp, &p).await.unwrap();
    assert_eq!(replaced.status.unwrap().pod_ip.as_deref(), Some("10.0.0.5"));
    assert_eq!(replaced.spec.unwrap().node_name, None);

    let nodes: Api<Node> = Api::all(h.client.clone());
    nodes
        .create(
            &pp,
            &object(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})),
        )
        .await
        .unwrap();
    let patched = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]},
                "spec": {"unschedulable": true}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.status.unwrap().conditions.unwrap()[0].type_,
        "Ready"
    );
    assert_eq!(patched.spec.and_then(|s| s.unschedulable), None);
}

#[tokio::test]
async fn certificate_signing_requests_are_approved_through_approval() {
    let h = start().await;
    let pp = PostParams::default();
    let csrs: Api<CertificateSigningRequest> = Api::all(h.client.clone());
    let created = csrs
        .create(
            &pp,
            &object(json!({"apiVersion": "certificates.k8s.io/v1",
                "kind": "CertificateSigningRequest", "metadata": {"name": "alice"},
                "spec": {"request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                    "signerName": "example.com/signer", "usages": ["client auth"],
                    "username": "someone-else"}})),
        )
        .await
        .unwrap();
    // Who asked is the server's to say.
    assert_ne!(created.spec.username.as_deref(), Some("someone-else"));

    let mut approving = created.clone();
    approving.status = Some(object(json!({"conditions": [{"type": "Approved",
        "status": "True", "reason": "Test", "message": "approved by the test"}]})));
    approving.spec.usages = Some(vec!["server auth".into()]);
    let approved = csrs
        .replace_subresource("approval", "alice", &pp, &approving)
        .await
        .unwrap();
    let conditions = approved.status.unwrap().conditions.unwrap();
    assert_eq!(conditions[0].type_, "Approved");
    assert!(conditions[0].last_update_time.is_some());
    // Only conditions change through approval.
    assert_eq!(approved.spec.usages, Some(vec!["client auth".to_string()]));

    let both = csrs
        .patch_subresource(
            "approval",
            "alice",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(both).0, 422);
    let read = csrs.get_subresource("approval", "alice").await.unwrap();
    assert_eq!(read.status.unwrap().conditions.unwrap().len(), 1);
}

#[tokio::test]
async fn core_and_events_k8s_io_events_are_one_collection() {
    let h = start().await;
    let core: Api<Event> = Api::namespaced(h.client.clone(), "default");
    let modern: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(h.client.clone(), "default");
    core.create(
        &PostParams::default(),
        &object(
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "w", "namespace": "default"},
            "reason": "Started", "message": "core", "type": "Normal"}),
        ),
    )
    .await
    .unwrap();
    let seen = modern.get("e1").await.unwrap();
    assert_eq!(seen.reason.as_deref(), Some("Started"));
    assert_eq!(seen.regarding.unwrap().name.as_deref(), Some("w"));
    modern
        .create(
            &PostParams::default(),
            &object(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e2"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "test", "reportingInstance": "t1", "action": "Pull",
                "regarding": {"kind": "Pod", "name": "v", "namespace": "default"},
                "reason": "Pulled", "note": "modern", "type": "Normal"})),
        )
        .await
        .unwrap();
    let old = core.get("e2").await.unwrap();
    assert_eq!(old.message.as_deref(), Some("modern"));
    assert_eq!(old.involved_object.name.as_deref(), Some("v"));
    let names = |l: Vec<String>| {
        let mut l = l;
        l.sort();
        l
    };
    let both = core.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        names(
            both.items
                .iter()
                .filter_map(|e| e.metadata.name.clone())
                .collect()
        ),
        ["e1", "e2"]
    );
}

#[tokio::test]
async fn discovery_names_the_kinds_subresources_take() {
    let h = start().await;
    let core = h.client.list_core_api_resources("v1").await.unwrap();
    let named = |list: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
                 n: &str| {
        list.resources
            .iter()
            .find(|r| r.name == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} is listed"))
    };
    let eviction = named(&core, "pods/eviction");
    assert_eq!(
        (
            eviction.group.as_deref(),
            eviction.version.as_deref(),
            eviction.kind.as_str()
        ),
        (Some("policy"), Some("v1"), "Eviction")
    );
    assert_eq!(named(&core, "pods/binding").verbs, ["create"]);
    assert_eq!(named(&core, "serviceaccounts/token").kind, "TokenRequest");
    let apps = h.client.list_api_group_resources("apps/v1").await.unwrap();
    assert_eq!(named(&apps, "deployments/scale").kind, "Scale");
    let certs = h
        .client
        .list_api_group_resources("certificates.k8s.io/v1")
        .await
        .unwrap();
    assert_eq!(
        named(&certs, "certificatesigningrequests/approval").verbs,
        ["get", "patch", "update"]
    );
}
