//! kube-rs's own cluster-gated tests (the `#[ignore]`d tests of the published kube-client 5.0.0
//! and kube-runtime 5.0.0 crates, and of the kube 5.0.0 crate that joins them), as behaviours of an embedded cluster: each test here drives
//! the same kube-rs API the upstream test drives and checks what it checks, written afresh
//! (never copied). The real `worker-gateway` serves the cluster; where the upstream test waits
//! for a kubelet to run a Pod, the kubelet stand-in (`kubelet_pods::PodRunner`) runs it.
//!
//! Upstream test -> ours:
//! - kube-client `api::util::node_cordon_and_uncordon_works` -> [`cordon_moves_a_node_out_of_the_schedulable_selection`]
//! - kube-client `api::util::create_token_request` -> [`a_requested_token_passes_review_with_its_audiences`]
//! - kube-client `api::entry::entry_create_missing_object` -> [`an_entry_creates_a_missing_object_then_a_stale_entry_conflicts`]
//! - kube-client `api::entry::entry_update_existing_object` -> [`an_entry_updates_an_object_and_a_stale_entry_conflicts`]
//! - kube-client `api::entry::entry_create_dry_run` -> [`an_entry_committed_as_a_dry_run_stores_nothing`]
//! - kube-client `custom_client_rustls_configuration` -> [`a_hand_built_rustls_client_lists_pods`]
//! - kube-client `group_discovery_oneshot` -> [`one_group_discovered_lists_its_kind`]
//! - kube-client `aggregated_discovery_apis`, `aggregated_discovery_core`,
//!   `discovery_run_aggregated` -> [`aggregated_discovery_names_groups_versions_and_verbs`]
//! - kube-client `pod_can_use_core_apis` -> [`a_pod_is_watched_to_running_replaced_and_deleted`]
//! - kube-client `can_get_pod_logs_and_evict` (its eviction) -> [`an_evicted_pod_answers_201_and_is_gone`]
//! - kube-client `can_operate_on_pod_metadata` -> [`pod_metadata_is_read_listed_and_patched_alone`]
//! - kube-client `csr_can_be_approved` -> [`a_csr_takes_conditions_through_its_approval`]
//! - kube-client `can_operate_on_ephemeral_containers` -> [`ephemeral_containers_are_added_patched_and_read`]
//! - kube-client `client::client_ext::client_ext_list_get_pods_svcs` -> [`the_client_lists_and_gets_by_scope`]
//! - kube-client `client::client_ext::client_ext_fetch_ref_pods_svcs` -> [`the_client_fetches_by_reference`]
//! - kube-client `client::client_ext::fetch_fails` -> [`a_reference_of_another_kind_fails_to_decode`]
//! - kube `custom_resource_generates_correct_core_structs` -> [`a_derived_kind_and_its_dynamic_form_share_a_url`]
//! - kube `derived_resource_queryable_and_has_subresources` -> [`a_derived_kind_is_applied_scaled_and_given_a_status`]
//! - kube `custom_serialized_objects_are_queryable_and_iterable` -> [`pods_are_read_through_a_shape_of_our_own`]
//! - kube `derived_resources_discoverable` (disabled upstream) -> [`a_derived_kind_is_discovered_and_everything_lists`]
//! - kube `pod_can_await_conditions` -> [`a_pod_is_awaited_running_and_ready_then_finalized`]
//! - kube `api_get_opt_handles_404` -> [`get_opt_of_a_missing_object_is_none`]
//! - kube-runtime `events::event_recorder_attaches_events` -> [`a_recorded_event_repeats_as_a_series`]
//! - kube-runtime `events::event_recorder_attaches_events_without_namespace` -> [`an_event_about_a_cluster_scoped_object_lands_in_default`]
//!   (about a Node: upstream reads the deprecated `ComponentStatus` `scheduler`, which is not
//!   served, as an embedded cluster runs no scheduler whose health it could report)
//! - kube-runtime `events::event_recorder_cache_retain` -> [`a_fresh_recorder_creates_the_event_anew`]
//!   (upstream ages the recorder's private cache; from outside, a recorder with an empty cache
//!   publishes the same event, which the server must create, not patch)
//!
//! Not here: `pod_can_exec_and_write_to_stdin`, `pod_can_exec_and_write_to_stdin_from_node_proxy`
//! and the logs of `can_get_pod_logs_and_evict` need a kubelet's streaming endpoints (no `exec`,
//! `attach` or `log` subresource is served); `custom_client_openssl_tls_configuration` needs
//! OpenSSL, which this project keeps out of its build; the `client::auth` exec tests are not
//! cluster tests.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use gpustack_tests::{
    embedded::{GatewayProcess, kube_client},
    kubelet_pods::PodRunner,
};
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec},
    certificates::v1::CertificateSigningRequest,
    core::v1::{ConfigMap, Namespace, Node, Pod, Service, ServiceAccount},
    events::v1::Event as K8sEvent,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{
        DeleteParams, DynamicObject, EvictParams, ListParams, ObjectMeta, PartialObjectMetaExt,
        Patch, PatchParams, PostParams, WatchEvent, WatchParams,
        entry::{CommitError, Entry, OccupiedEntry},
    },
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use serde_json::json;

/// A fresh embedded cluster and an admin kube client of it.
async fn cluster(dir: &tempfile::TempDir) -> (GatewayProcess, Client) {
    let gw = GatewayProcess::start(&dir.path().join("gw"), "kube-rs");
    let client = kube_client(&gw.kubeconfig()).await;
    (gw, client)
}

fn value_of(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get("key").map(String::as_str)
}

fn config_map_with(value: &str) -> ConfigMap {
    ConfigMap {
        data: Some([("key".to_string(), value.to_string())].into()),
        ..ConfigMap::default()
    }
}

/// Sets the entry's `key` to `value`, as a caller edits an entry before committing it.
fn set_value(entry: &mut OccupiedEntry<'_, ConfigMap>, value: &str) {
    entry
        .get_mut()
        .data
        .get_or_insert_with(Default::default)
        .insert("key".into(), value.into());
}

/// The stored ConfigMap's value, or `None` when there is none.
async fn stored(api: &Api<ConfigMap>, name: &str) -> Option<String> {
    let cm = api.get_opt(name).await.unwrap()?;
    value_of(&cm).map(str::to_owned)
}

fn occupied(e: Entry<'_, ConfigMap>) -> OccupiedEntry<'_, ConfigMap> {
    match e {
        Entry::Occupied(o) => o,
        Entry::Vacant(_) => panic!("an existing object's entry is occupied"),
    }
}

fn is_api_error(e: &CommitError, code: u16) -> bool {
    matches!(e, CommitError::Save(kube::Error::Api(s)) if s.code == code)
}

#[tokio::test]
async fn cordon_moves_a_node_out_of_the_schedulable_selection() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let nodes: Api<Node> = Api::all(client);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "fakenode"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let schedulable = ListParams::default().fields("spec.unschedulable==false");
    let count = || async { nodes.list(&schedulable).await.unwrap().items.len() };
    let before = count().await;
    assert!(before >= 1, "the new node is schedulable");
    let cordoned = nodes.cordon("fakenode").await.unwrap();
    assert_eq!(cordoned.spec.unwrap().unschedulable, Some(true));
    assert_eq!(count().await, before - 1);
    nodes.uncordon("fakenode").await.unwrap();
    assert_eq!(count().await, before);
    nodes
        .delete("fakenode", &DeleteParams::default())
        .await
        .unwrap();
    assert!(nodes.get_opt("fakenode").await.unwrap().is_none());
}

#[tokio::test]
async fn a_requested_token_passes_review_with_its_audiences() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "fakesa"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let audiences = vec!["api".to_string()];
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.clone(),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request("fakesa", &PostParams::default(), &request)
        .await
        .unwrap();
    let token = issued.status.expect("a status").token;
    assert!(!token.is_empty());
    let review = TokenReview {
        spec: TokenReviewSpec {
            audiences: Some(audiences.clone()),
            token: Some(token),
        },
        ..TokenReview::default()
    };
    let reviewed = Api::<TokenReview>::all(client)
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .expect("a review status");
    assert_eq!(reviewed.authenticated, Some(true));
    assert_eq!(reviewed.audiences, Some(audiences));
    assert_eq!(reviewed.error, None);
    assert_eq!(
        reviewed.user.and_then(|u| u.username).as_deref(),
        Some("system:serviceaccount:default:fakesa")
    );
    accounts
        .delete("fakesa", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn an_entry_creates_a_missing_object_then_a_stale_entry_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let first = api.entry("entry-missing").await.unwrap();
    let second = api.entry("entry-missing").await.unwrap();
    assert!(first.get().is_none() && second.get().is_none());

    let mut first = first.or_insert(|| config_map_with("value"));
    first.commit(&PostParams::default()).await.unwrap();
    assert_eq!(value_of(first.get()), Some("value"));
    assert_eq!(
        stored(&api, "entry-missing").await.as_deref(),
        Some("value")
    );
    set_value(&mut first, "value2");
    first.commit(&PostParams::default()).await.unwrap();
    assert_eq!(value_of(first.get()), Some("value2"));
    assert_eq!(
        stored(&api, "entry-missing").await.as_deref(),
        Some("value2")
    );

    // The second entry still thinks the object is missing: its create is refused (409).
    let mut second = second.or_insert(|| config_map_with("value3"));
    let refused = second.commit(&PostParams::default()).await.unwrap_err();
    assert!(is_api_error(&refused, 409), "{refused:?}");
    match &refused {
        CommitError::Save(kube::Error::Api(s)) => assert_eq!(s.reason, "AlreadyExists"),
        other => panic!("{other:?}"),
    }
    api.delete("entry-missing", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn an_entry_updates_an_object_and_a_stale_entry_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let mut existing = config_map_with("value");
    existing.metadata = ObjectMeta {
        name: Some("entry-existing".into()),
        ..ObjectMeta::default()
    };
    api.create(&PostParams::default(), &existing).await.unwrap();
    let mut first = occupied(api.entry("entry-existing").await.unwrap());
    let mut second = occupied(api.entry("entry-existing").await.unwrap());
    set_value(&mut first, "value2");
    first.commit(&PostParams::default()).await.unwrap();
    assert_eq!(value_of(first.get()), Some("value2"));
    assert_eq!(
        stored(&api, "entry-existing").await.as_deref(),
        Some("value2")
    );
    // The second entry holds the old resourceVersion: its update is refused (409 Conflict).
    set_value(&mut second, "value3");
    let refused = second.commit(&PostParams::default()).await.unwrap_err();
    assert!(is_api_error(&refused, 409), "{refused:?}");
    assert_eq!(
        stored(&api, "entry-existing").await.as_deref(),
        Some("value2")
    );
}

#[tokio::test]
async fn an_entry_committed_as_a_dry_run_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut entry = api
        .entry("entry-dry")
        .await
        .unwrap()
        .or_insert(|| config_map_with("value"));
    entry.commit(&dry).await.unwrap();
    assert_eq!(value_of(entry.get()), Some("value"));
    assert!(api.get_opt("entry-dry").await.unwrap().is_none());

    entry.commit(&PostParams::default()).await.unwrap();
    assert_eq!(stored(&api, "entry-dry").await.as_deref(), Some("value"));

    set_value(&mut entry, "value2");
    entry.commit(&dry).await.unwrap();
    assert_eq!(value_of(entry.get()), Some("value2"));
    assert_eq!(
        stored(&api, "entry-dry").await.as_deref(),
        Some("value"),
        "a dry-run update changes nothing stored"
    );
    // The entry still commits for real after a dry run (its resourceVersion was kept current).
    entry.commit(&PostParams::default()).await.unwrap();
    assert_eq!(stored(&api, "entry-dry").await.as_deref(), Some("value2"));
}

#[tokio::test]
async fn a_hand_built_rustls_client_lists_pods() {
    use hyper_util::rt::TokioExecutor;
    use kube::client::ConfigExt;
    use tower::ServiceBuilder;

    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("gw"), "kube-rs");
    let kubeconfig = kube::config::Kubeconfig::read_from(gw.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let https = config.rustls_https_connector().unwrap();
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        // The embedded cluster's kubeconfig carries a bearer token (upstream's, a certificate).
        .layer(config.auth_layer().unwrap().expect("a token's auth layer"))
        .map_err(tower::BoxError::from)
        .service(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https));
    let client = Client::new(service, config.default_namespace);
    let pods: Api<Pod> = Api::default_namespaced(client);
    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty());
    assert!(listed.metadata.resource_version.is_some());
}

#[tokio::test]
async fn one_group_discovered_lists_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let group = kube::discovery::group(&client, "apiregistration.k8s.io")
        .await
        .unwrap();
    let (resource, caps) = group.recommended_kind("APIService").expect("APIService");
    assert_eq!(resource.plural, "apiservices");
    assert!(caps.supports_operation(kube::discovery::verbs::LIST));
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    api.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn aggregated_discovery_names_groups_versions_and_verbs() {
    use kube::discovery::{Discovery, verbs};

    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let apis = client.list_api_groups_aggregated().await.unwrap();
    let apps = apis
        .items
        .iter()
        .find(|g| g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some("apps"))
        .expect("the apps group");
    let v1 = apps
        .versions
        .iter()
        .find(|v| v.version.as_deref() == Some("v1"))
        .expect("apps/v1");
    assert!(
        v1.resources
            .iter()
            .any(|r| r.resource.as_deref() == Some("deployments"))
    );

    let core = client.list_core_api_versions_aggregated().await.unwrap();
    let v1 = core.items[0]
        .versions
        .iter()
        .find(|v| v.version.as_deref() == Some("v1"))
        .expect("core v1");
    let pods = v1
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("pods"))
        .expect("pods");
    assert_eq!(pods.scope.as_deref(), Some("Namespaced"));
    assert!(pods.verbs.iter().any(|v| v == "list"));

    let discovery = Discovery::new(client).run_aggregated().await.unwrap();
    assert!(discovery.has_group("") && discovery.has_group("apps"));
    let (ar, caps) = discovery
        .get("apps")
        .unwrap()
        .recommended_kind("Deployment")
        .unwrap();
    assert_eq!(ar.kind, "Deployment");
    assert!(caps.supports_operation(verbs::LIST));
    let (ar, caps) = discovery.get("").unwrap().recommended_kind("Pod").unwrap();
    assert_eq!(ar.kind, "Pod");
    assert!(caps.supports_operation(verbs::GET));
}

/// A Pod the kubelet stand-in of `node` runs: `sh -c COMMAND`.
fn busybox(name: &str, node: &str, command: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "kube-rs-test"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Never",
            "containers": [{"name": "busybox", "image": "busybox:stable",
                "command": ["sh", "-c", command]}],
        }
    }))
    .unwrap()
}

const NODE: &str = "kube-rs-node";

/// The kubelet stand-in of [`NODE`], with busybox "pulled": it runs the Pods bound there.
fn kubelet(client: &Client, dir: &tempfile::TempDir) -> PodRunner {
    PodRunner::start(
        client.clone(),
        NODE,
        &dir.path().join("kubelet"),
        &["busybox:stable"],
    )
}

#[tokio::test]
async fn a_pod_is_watched_to_running_replaced_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let _kubelet = kubelet(&client, &dir);
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = busybox("busybox-kube1", NODE, "sleep 30");
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(created.name_any(), "busybox-kube1");

    // A watch from "0" (any version) until the Pod runs; the watch's own timeout bounds it.
    let wp = WatchParams::default()
        .fields("metadata.name=busybox-kube1")
        .timeout(15);
    let mut stream = pods.watch(&wp, "0").await.unwrap().boxed();
    let mut running = false;
    while let Some(ev) = stream.try_next().await.unwrap() {
        match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p)
                if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") =>
            {
                running = true;
                break;
            }
            WatchEvent::Error(e) => panic!("watch error: {e}"),
            _ => {}
        }
    }
    assert!(running, "the watch saw the Pod run");

    let mut got = pods.get("busybox-kube1").await.unwrap();
    assert_eq!(got.spec.as_ref().unwrap().containers[0].name, "busybox");
    assert!(got.resource_version().is_some());
    got.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
    let replaced = pods
        .replace("busybox-kube1", &PostParams::default(), &got)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().active_deadline_seconds, Some(5));

    let deleted = pods
        .delete("busybox-kube1", &DeleteParams::default())
        .await
        .unwrap();
    // Answered with the Pod as deleted (the embedded cluster deletes a Pod at once: there is
    // no graceful deletion for a kubelet to confirm).
    let answered = deleted.left().expect("the deleted Pod");
    assert_eq!(answered.name_any(), "busybox-kube1");
    let pods = &pods;
    let gone = gpustack_tests::wait::poll(Duration::from_secs(30), move || async move {
        pods.get_opt("busybox-kube1")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the Pod is gone");
}

#[tokio::test]
async fn an_evicted_pod_answers_201_and_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    // Never scheduled: an eviction deletes it at once.
    let pod = busybox("busybox-kube3", "", "true");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let answer = pods
        .evict("busybox-kube3", &EvictParams::default())
        .await
        .unwrap();
    assert_eq!(answer.code, 201);
    assert!(answer.is_success());
    assert!(pods.get_opt("busybox-kube3").await.unwrap().is_none());
}

#[tokio::test]
async fn pod_metadata_is_read_listed_and_patched_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = busybox("busybox-kube-meta", "", "sleep 30");
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let meta = pods.get_metadata("busybox-kube-meta").await.unwrap();
    assert_eq!(meta.name_any(), "busybox-kube-meta");
    assert_eq!(
        meta.labels().get("app").map(String::as_str),
        Some("kube-rs-test")
    );
    let listed = pods.list_metadata(&ListParams::default()).await.unwrap();
    let found = listed
        .items
        .iter()
        .find(|p| p.name_any() == "busybox-kube-meta")
        .expect("the Pod's metadata in the list");
    assert_eq!(
        found.labels().get("app").map(String::as_str),
        Some("kube-rs-test")
    );

    let patch = ObjectMeta {
        annotations: Some([("test".to_string(), "123".to_string())].into()),
        ..ObjectMeta::default()
    }
    .into_request_partial::<Pod>();
    let patched = pods
        .patch_metadata(
            "busybox-kube-meta",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.annotations().get("test").map(String::as_str),
        Some("123")
    );
    let types = patched.types.as_ref().expect("the answer's type");
    assert_eq!(types.kind, "PartialObjectMetadata");
    assert_eq!(types.api_version, "meta.k8s.io/v1");

    let deleted = pods
        .delete("busybox-kube-meta", &DeleteParams::default())
        .await
        .unwrap();
    // Never scheduled: deleted at once, answered with the object as it was.
    assert_eq!(
        deleted.left().expect("the deleted Pod").name_any(),
        "busybox-kube-meta"
    );
}

/// A certificate request of our own key for `CN=kube-rs`: PEM, base64-encoded as the CSR's
/// `spec.request` carries it.
fn certificate_request() -> String {
    use base64::Engine as _;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kube-rs");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[tokio::test]
async fn a_csr_takes_conditions_through_its_approval() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(client);
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "fake"},
        "spec": {"request": certificate_request(), "signerName": "kubernetes.io/kube-apiserver-client",
            "expirationSeconds": 86400, "usages": ["client auth"]}
    }))
    .unwrap();
    csrs.create(&PostParams::default(), &csr).await.unwrap();
    let status = json!({"status": {"conditions": [{"type": "ApprovedFake", "status": "True",
        "reason": "kube-rsClient", "message": "ApprovedFake by kube-rs client"}]}});
    csrs.patch_approval("fake", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let after = csrs.get_approval("fake").await.unwrap();
    let conditions = after.status.unwrap().conditions.unwrap();
    assert_eq!(conditions[0].type_, "ApprovedFake");
    assert_eq!(conditions[0].reason.as_deref(), Some("kube-rsClient"));
    csrs.delete("fake", &DeleteParams::default()).await.unwrap();
    assert!(csrs.get_opt("fake").await.unwrap().is_none());
}

#[tokio::test]
async fn ephemeral_containers_are_added_patched_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let version = client.apiserver_version().await.unwrap();
    assert!(
        version.major == "1" && version.minor.trim_end_matches('+').parse::<u32>().unwrap() >= 25,
        "ephemeral containers are stable from 1.25: {version:?}"
    );
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = busybox("ephemeral-container-test", "", "sleep 2");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let none = pods
        .get_ephemeral_containers("ephemeral-container-test")
        .await
        .unwrap();
    assert_eq!(none.spec.unwrap().ephemeral_containers, None);

    let first = json!({"name": "myephemeralcontainer1", "image": "busybox:stable",
        "command": ["sh", "-c", "sleep 2"]});
    let replacement: Pod = serde_json::from_value(json!({
        "metadata": {"name": "ephemeral-container-test"},
        "spec": {"ephemeralContainers": [first]}
    }))
    .unwrap();
    let replaced = pods
        .replace_ephemeral_containers(
            "ephemeral-container-test",
            &PostParams::default(),
            &replacement,
        )
        .await
        .unwrap()
        .spec
        .unwrap()
        .ephemeral_containers
        .expect("the ephemeral container");
    assert_eq!(replaced.len(), 1);
    assert_eq!(replaced[0].name, "myephemeralcontainer1");
    assert_eq!(replaced[0].image.as_deref(), Some("busybox:stable"));

    let second = json!({"name": "myephemeralcontainer2", "image": "busybox:stable",
        "command": ["sh", "-c", "sleep 1"]});
    let patch: Pod =
        serde_json::from_value(json!({"spec": {"ephemeralContainers": [second]}})).unwrap();
    let patched = pods
        .patch_ephemeral_containers(
            "ephemeral-container-test",
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .unwrap()
        .spec
        .unwrap()
        .ephemeral_containers
        .expect("the ephemeral containers");
    // A strategic merge by name: one from each write.
    assert_eq!(patched.len(), 2);
    let added = patched
        .iter()
        .find(|c| c.name == "myephemeralcontainer2")
        .expect("the patched-in container");
    assert_eq!(
        added.command.as_deref(),
        Some(&["sh".to_string(), "-c".into(), "sleep 1".into()][..])
    );
    let read = pods
        .get_ephemeral_containers("ephemeral-container-test")
        .await
        .unwrap()
        .spec
        .unwrap()
        .ephemeral_containers
        .unwrap();
    assert_eq!(read, patched);

    // The main endpoint may not change them, and an ephemeral container is never taken back.
    let mut whole = pods.get("ephemeral-container-test").await.unwrap();
    whole.spec.as_mut().unwrap().ephemeral_containers = None;
    let refused = pods
        .replace("ephemeral-container-test", &PostParams::default(), &whole)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 422),
        "{refused:?}"
    );
    let mut emptied = pods
        .get_ephemeral_containers("ephemeral-container-test")
        .await
        .unwrap();
    emptied.spec.as_mut().unwrap().ephemeral_containers = Some(Vec::new());
    let refused = pods
        .replace_ephemeral_containers("ephemeral-container-test", &PostParams::default(), &emptied)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 422),
        "{refused:?}"
    );
    pods.delete("ephemeral-container-test", &DeleteParams::default())
        .await
        .unwrap();
}

fn event(reason: &str, note: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note.into()),
        action: "Test event - plz ignore".into(),
        secondary: None,
    }
}

/// The first `events.k8s.io/v1` Event in `default` with `reason`.
async fn find_event(client: &Client, reason: &str) -> K8sEvent {
    Api::<K8sEvent>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.reason.as_deref() == Some(reason))
        .unwrap_or_else(|| panic!("an Event with reason {reason}"))
}

#[tokio::test]
async fn a_recorded_event_repeats_as_a_series() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .unwrap();
    let recorder = Recorder::new(client.clone(), "kube".into());
    let reference = svc.object_ref(&());
    let first = event("VeryCoolService", "Sending kubernetes to detention");
    recorder.publish(&first, &reference).await.unwrap();
    let found = find_event(&client, "VeryCoolService").await;
    assert_eq!(
        found.note.as_deref(),
        Some("Sending kubernetes to detention")
    );
    assert!(found.series.is_none());
    let again = event("VeryCoolService", "Sending kubernetes to detention twice");
    recorder.publish(&again, &reference).await.unwrap();
    let found = find_event(&client, "VeryCoolService").await;
    assert_eq!(found.series.expect("a series").count, 2);
}

#[tokio::test]
async fn an_event_about_a_cluster_scoped_object_lands_in_default() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "scheduler"}})).unwrap();
    let node = nodes.create(&PostParams::default(), &node).await.unwrap();
    let recorder = Recorder::new(client.clone(), "kube".into());
    let reference = node.object_ref(&());
    let first = event("VeryCoolServiceNoNamespace", "without namespace");
    recorder.publish(&first, &reference).await.unwrap();
    let found = find_event(&client, "VeryCoolServiceNoNamespace").await;
    assert_eq!(found.note.as_deref(), Some("without namespace"));
    assert_eq!(
        found.regarding.and_then(|r| r.kind).as_deref(),
        Some("Node")
    );
    let again = event("VeryCoolServiceNoNamespace", "without namespace twice");
    recorder.publish(&again, &reference).await.unwrap();
    let found = find_event(&client, "VeryCoolServiceNoNamespace").await;
    assert!(found.series.is_some());
}

#[tokio::test]
async fn a_fresh_recorder_creates_the_event_anew() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let ns = Api::<Namespace>::all(client.clone())
        .get("default")
        .await
        .unwrap();
    let reporter = Reporter {
        controller: "kube".into(),
        instance: None,
    };
    let ev = event("TestCacheTtl", "Sending kubernetes to detention");
    Recorder::new(client.clone(), reporter.clone())
        .publish(&ev, &ns.object_ref(&()))
        .await
        .unwrap();
    Recorder::new(client.clone(), reporter)
        .publish(&ev, &ns.object_ref(&()))
        .await
        .unwrap();
    let all: Vec<K8sEvent> = Api::<K8sEvent>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("TestCacheTtl"))
        .collect();
    assert_eq!(all.len(), 2, "two Events, one per recorder");
    for e in &all {
        assert_eq!(e.note.as_deref(), Some("Sending kubernetes to detention"));
        assert!(e.series.is_none());
    }
}

#[tokio::test]
async fn the_client_lists_and_gets_by_scope() {
    use k8s_openapi::api::{batch::v1::Job, rbac::v1::ClusterRole};
    use kube::client::scope::{Cluster, Namespace as InNamespace};

    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    pods.create(&PostParams::default(), &busybox("lister", "", "true"))
        .await
        .unwrap();
    let lp = ListParams::default();
    let mut found = Vec::new();
    for ns in client.list::<Namespace>(&lp, &Cluster).await.unwrap() {
        let scope = InNamespace::try_from(&ns).unwrap();
        for p in client.list::<Pod>(&lp, &scope).await.unwrap() {
            found.push(format!("{}/{}", ns.name_any(), p.name_any()));
        }
    }
    assert_eq!(found, ["kube-system/lister"]);
    assert!(
        client
            .list::<Job>(&lp, &Cluster)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let default: InNamespace = "default".into();
    let svc = client.get::<Service>("kubernetes", &default).await.unwrap();
    assert_eq!(svc.name_any(), "kubernetes");
    let admin = client
        .get::<ClusterRole>("cluster-admin", &Cluster)
        .await
        .unwrap();
    assert_eq!(admin.name_any(), "cluster-admin");
}

#[tokio::test]
async fn the_client_fetches_by_reference() {
    use k8s_openapi::api::{
        core::v1::{LocalObjectReference, ObjectReference},
        rbac::v1::ClusterRole,
    };
    use kube::client::scope::{Namespace as InNamespace, NamespacedRef as _};

    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let svc: Service = client
        .fetch(&ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Service".into()),
            name: Some("kubernetes".into()),
            namespace: Some("default".into()),
            ..ObjectReference::default()
        })
        .await
        .unwrap();
    assert_eq!(svc.name_any(), "kubernetes");
    let admin: ClusterRole = client
        .fetch(&ObjectReference {
            api_version: Some("rbac.authorization.k8s.io/v1".into()),
            kind: Some("ClusterRole".into()),
            name: Some("cluster-admin".into()),
            ..ObjectReference::default()
        })
        .await
        .unwrap();
    assert_eq!(admin.name_any(), "cluster-admin");
    let untyped: DynamicObject = client.fetch(&svc.object_ref(&())).await.unwrap();
    assert_eq!(untyped.name_any(), "kubernetes");
    let untyped: DynamicObject = client.fetch(&admin.object_ref(&())).await.unwrap();
    assert_eq!(untyped.name_any(), "cluster-admin");
    let local = LocalObjectReference {
        name: "kubernetes".into(),
    };
    let svc: Service = client.fetch(&local.within(svc.namespace())).await.unwrap();
    assert_eq!(svc.name_any(), "kubernetes");

    // A mirror Pod of a control-plane component, owned by its Node, as kubelets write them:
    // the owner is fetched through the Pod's owner reference.
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "control"}})).unwrap();
    let node = nodes.create(&PostParams::default(), &node).await.unwrap();
    let mut mirror = busybox("kube-apiserver-control", "control", "true");
    mirror.metadata.labels = Some([("component".to_string(), "kube-apiserver".to_string())].into());
    mirror.metadata.owner_references = Some(vec![
        node.controller_owner_ref(&())
            .expect("a Node's owner reference"),
    ]);
    Api::<Pod>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &mirror)
        .await
        .unwrap();
    let kube_system: InNamespace = "kube-system".into();
    let apiservers = client
        .list::<Pod>(
            &ListParams::default().labels("component=kube-apiserver"),
            &kube_system,
        )
        .await
        .unwrap();
    assert_eq!(apiservers.items.len(), 1);
    for pod in apiservers {
        let owner = pod
            .owner_references()
            .iter()
            .find(|r| r.kind == "Node")
            .expect("a Node owns the mirror Pod");
        let owner: Node = client.fetch(owner).await.unwrap();
        assert_eq!(owner.name_any(), "control");
    }
}

#[tokio::test]
async fn a_reference_of_another_kind_fails_to_decode() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let svc: Service = Api::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .unwrap();
    let err = client.fetch::<Pod>(&svc.object_ref(&())).await.unwrap_err();
    assert!(matches!(err, kube::Error::SerdeError(_)), "{err:?}");
    // Column 17: the answer starts `{"kind":"Service"`, as kube-apiserver writes objects.
    assert_eq!(
        err.to_string(),
        "Error deserializing response: invalid value: string \"Service\", expected Pod at line 1 column 17"
    );
    let obj: DynamicObject = client.fetch(&svc.object_ref(&())).await.unwrap();
    let err = obj.try_parse::<Pod>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to parse this DynamicObject into a Resource: invalid value: string \"Service\", expected Pod"
    );
}

/// A kind of our own, derived as kube-rs's tests derive theirs: a status and a scale
/// subresource whose replicas live at `.spec.replicas` and `.status.replicas`.
#[derive(
    kube::CustomResource, serde::Deserialize, serde::Serialize, Clone, Debug, schemars::JsonSchema,
)]
#[kube(group = "example.com", version = "v1", kind = "Widget", namespaced)]
#[kube(status = "WidgetStatus")]
#[kube(scale(
    spec_replicas_path = ".spec.replicas",
    status_replicas_path = ".status.replicas"
))]
pub struct WidgetSpec {
    name: String,
    info: Option<String>,
    replicas: i32,
}

#[derive(serde::Deserialize, serde::Serialize, Clone, Debug, Default, schemars::JsonSchema)]
pub struct WidgetStatus {
    healthy: bool,
    replicas: i32,
}

/// Applies Widget's CRD server-side and waits until it is established.
async fn widget_kind(
    client: &Client,
) -> Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    use kube::{
        CustomResourceExt,
        runtime::wait::{await_condition, conditions},
    };
    let crds = Api::all(client.clone());
    let apply = PatchParams::apply("kube-rs-tests").force();
    crds.patch("widgets.example.com", &apply, &Patch::Apply(Widget::crd()))
        .await
        .unwrap();
    let established = await_condition(
        crds.clone(),
        "widgets.example.com",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .expect("the CRD is established in time")
        .unwrap();
    crds
}

#[tokio::test]
async fn a_derived_kind_and_its_dynamic_form_share_a_url() {
    use kube::core::{ApiResource, GroupVersionKind};
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "myns", &ApiResource::from_gvk(&gvk));
    let typed: Api<Widget> = Api::namespaced(client, "myns");
    assert_eq!(dynamic.resource_url(), typed.resource_url());
    assert_eq!(
        typed.resource_url(),
        "/apis/example.com/v1/namespaces/myns/widgets"
    );
}

#[tokio::test]
async fn a_derived_kind_is_applied_scaled_and_given_a_status() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let crds = widget_kind(&client).await;
    let widgets: Api<Widget> = Api::default_namespaced(client);
    let apply = PatchParams::apply("kube-rs-tests").force();
    let spec = WidgetSpec {
        name: "baz".into(),
        info: Some("old baz".into()),
        replicas: 1,
    };
    let applied = widgets
        .patch("baz", &apply, &Patch::Apply(&Widget::new("baz", spec)))
        .await
        .unwrap();
    assert_eq!(applied.spec.name, "baz");
    let reference = applied.object_ref(&());
    assert_eq!(reference.name.as_deref(), Some("baz"));
    assert_eq!(reference.uid, applied.uid());

    // A partial apply configuration: the fields it names change, the others go with it (the
    // same manager no longer claims `info`).
    let partial = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "spec": {"name": "foo", "replicas": 2}});
    let applied = widgets
        .patch("baz", &apply, &Patch::Apply(partial))
        .await
        .unwrap();
    assert_eq!(applied.spec.replicas, 2);
    assert_eq!(applied.spec.info, None);

    let scale = widgets.get_scale("baz").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
    assert!(widgets.get_status("baz").await.unwrap().status.is_none());

    let status = json!({"status": WidgetStatus { healthy: true, replicas: 1 }});
    let with_status = widgets
        .patch_status("baz", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert!(with_status.status.as_ref().is_some_and(|s| s.healthy));

    let scaled = widgets
        .patch_scale(
            "baz",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.status.map(|s| s.replicas), Some(1));
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(3));
    assert_eq!(widgets.get("baz").await.unwrap().spec.replicas, 3);

    widgets
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    assert!(widgets.get_opt("baz").await.unwrap().is_none());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn pods_are_read_through_a_shape_of_our_own() {
    use kube::core::{
        ApiResource,
        object::{HasSpec, HasStatus, NotUsed, Object},
    };
    #[derive(Clone, serde::Deserialize, Debug)]
    struct SimplePodSpec {
        containers: Vec<SimpleContainer>,
    }
    #[derive(Clone, serde::Deserialize, Debug)]
    struct SimpleContainer {
        image: String,
    }
    type SimplePod = Object<SimplePodSpec, NotUsed>;

    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    Api::<Pod>::default_namespaced(client.clone())
        .create(&PostParams::default(), &busybox("shaped", "", "true"))
        .await
        .unwrap();
    let resource = ApiResource::erase::<Pod>(&());
    let api: Api<SimplePod> = Api::default_namespaced_with(client, &resource);
    let mut list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].spec().containers[0].image, "busybox:stable");
    for pod in &mut list {
        pod.spec_mut().containers.clear();
        *pod.status_mut() = None;
        pod.annotations_mut()
            .insert("kube-seen".into(), "yes".into());
        pod.labels_mut().insert("kube.rs".into(), "hello".into());
        pod.finalizers_mut().push("kube-finalizer".into());
        pod.managed_fields_mut().clear();
    }
    for pod in list {
        assert_eq!(
            pod.annotations().get("kube-seen").map(String::as_str),
            Some("yes")
        );
        assert_eq!(
            pod.labels().get("kube.rs").map(String::as_str),
            Some("hello")
        );
        assert!(pod.finalizers().contains(&"kube-finalizer".to_string()));
        assert!(pod.spec().containers.is_empty());
        assert!(pod.managed_fields().is_empty());
    }
}

#[tokio::test]
async fn a_derived_kind_is_discovered_and_everything_lists() {
    use kube::{
        core::{GroupVersion, GroupVersionKind},
        discovery::{self, ApiGroup, Discovery, verbs},
    };
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    widget_kind(&client).await;
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let gv = GroupVersion::gv("example.com", "v1");
    let group = discovery::pinned_group(&client, &gv).await.unwrap();
    let (by_group, caps_by_group) = group.recommended_kind("Widget").unwrap();
    let (by_kind, caps_by_kind) = discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(by_group, by_kind);
    assert_eq!(
        caps_by_group.operations.len(),
        caps_by_kind.operations.len()
    );
    assert_eq!(DynamicObject::api_version(&by_kind), "example.com/v1");

    let discovery = Discovery::new(client.clone())
        .exclude(&["rbac.authorization.k8s.io"])
        .run()
        .await
        .unwrap();
    assert!(discovery.has_group("example.com"));
    let (found, _) = discovery.resolve_gvk(&gvk).unwrap();
    assert_eq!(
        (found.group, found.version, found.kind),
        ("example.com".into(), "v1".into(), "Widget".into())
    );
    assert!(
        !discovery.has_group("rbac.authorization.k8s.io"),
        "excluded"
    );
    let mut groups = discovery.groups_alphabetical().into_iter();
    assert_eq!(groups.next().unwrap().name(), ApiGroup::CORE_GROUP);
    let mut listed = 0;
    for group in groups {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            api.list(&ListParams::default())
                .await
                .unwrap_or_else(|e| panic!("listing {}: {e}", ar.plural));
            listed += 1;
        }
    }
    assert!(listed > 10, "every listable kind was listed ({listed})");
}

#[tokio::test]
async fn a_pod_is_awaited_running_and_ready_then_finalized() {
    use kube::runtime::wait::{
        Condition, await_condition, conditions, delete::delete_and_finalize,
    };
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let _kubelet = kubelet(&client, &dir);
    let pods: Api<Pod> = Api::default_namespaced(client);
    let created = pods
        .create(
            &PostParams::default(),
            &busybox("busybox-kube4", NODE, "sleep 20"),
        )
        .await
        .unwrap();
    assert_eq!(created.name_any(), "busybox-kube4");
    let running = await_condition(pods.clone(), "busybox-kube4", conditions::is_pod_running());
    tokio::time::timeout(Duration::from_secs(15), running)
        .await
        .expect("running in time")
        .unwrap();
    let pod = pods.get("busybox-kube4").await.unwrap();
    assert_eq!(pod.spec.unwrap().containers[0].name, "busybox");

    fn containers_ready() -> impl Condition<Pod> {
        |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "ContainersReady"))
                .is_some_and(|c| c.status == "True")
        }
    }
    let ready = await_condition(
        pods.clone(),
        "busybox-kube4",
        conditions::is_pod_running().and(containers_ready()),
    );
    tokio::time::timeout(Duration::from_secs(10), ready)
        .await
        .expect("ready in time")
        .unwrap();

    delete_and_finalize(pods.clone(), "busybox-kube4", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods.get("busybox-kube4").await.is_err());
}

#[tokio::test]
async fn get_opt_of_a_missing_object_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, client) = cluster(&dir).await;
    let maps = Api::<ConfigMap>::default_namespaced(client);
    assert!(
        maps.get_opt("this-cm-does-not-exist")
            .await
            .unwrap()
            .is_none()
    );
    let err = maps.get("this-cm-does-not-exist").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404),
        "{err:?}"
    );
}
