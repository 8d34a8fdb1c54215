//! CRD validation rules (`x-kubernetes-validations`) and webhooks' `matchConditions`, against
//! the real `worker-gateway --embedded-cluster` written to with a real kube client: rules are
//! enforced on create, update, patch, apply and status writes with kube-apiserver's 422s;
//! rules (and conditions) that do not compile or would cost too much are refused when the
//! CRD (or configuration) is written; and a large object against an accepted rule is
//! answered within a time bound while the server's memory, sampled from /proc, stays bounded.

use std::time::{Duration, Instant};

use gpustack_tests::embedded::{DEADLINE, GatewayProcess, kube_client};
use gpustack_tests::{bench::proc_status_mb, wait::poll};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
    core::GroupVersionKind,
};
use serde_json::{Value, json};

const GROUP: &str = "cel.example.com";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn crds(c: &Client) -> Api<DynamicObject> {
    Api::all_with(
        c.clone(),
        &resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    )
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("an object")
}

/// A CRD of kind `kind` whose `spec` (and `status`) follow the given schemas.
fn crd(kind: &str, plural: &str, spec: Value, status: Value) -> DynamicObject {
    object(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": spec, "status": status}}}}]}
    }))
}

/// Creates a CRD of kind `kind` whose spec follows `spec`.
async fn create_crd(
    c: &Client,
    kind: &str,
    plural: &str,
    spec: Value,
) -> Result<DynamicObject, kube::Error> {
    let status = json!({"type": "object"});
    crds(c)
        .create(&PostParams::default(), &crd(kind, plural, spec, status))
        .await
}

/// The 422 a write was refused with: its message.
#[track_caller]
fn invalid<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> String {
    match r {
        Err(kube::Error::Api(s)) if s.code == 422 && s.reason == "Invalid" => s.message.clone(),
        other => panic!("expected a 422 Invalid, got {other:?}"),
    }
}

async fn served(api: &Api<DynamicObject>) {
    poll(DEADLINE, || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await
    .expect("the kind to be served");
}

/// A merge patch of `name`'s object (or its status).
async fn merge(
    api: &Api<DynamicObject>,
    name: &str,
    status: bool,
    patch: Value,
) -> Result<DynamicObject, kube::Error> {
    let pp = PatchParams::default();
    if status {
        api.patch_status(name, &pp, &Patch::Merge(patch)).await
    } else {
        api.patch(name, &pp, &Patch::Merge(patch)).await
    }
}

fn widget_spec() -> Value {
    json!({"type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
        {"rule": "self.replicas >= oldSelf.replicas", "fieldPath": ".replicas",
         "messageExpression": "'replicas may not shrink from ' + string(oldSelf.replicas) + ' to ' + string(self.replicas)"},
        {"rule": "!has(self.legacy)", "reason": "FieldValueForbidden", "message": "legacy is gone"}
    ],
    "properties": {
        "min": {"type": "integer"}, "max": {"type": "integer"},
        "replicas": {"type": "integer"},
        "legacy": {"type": "string"},
        "mode": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "mode is immutable"}]},
        "owner": {"type": "string", "x-kubernetes-validations": [
            {"rule": "oldSelf.hasValue() ? self == oldSelf.value() : self.startsWith('team-')",
             "optionalOldSelf": true, "message": "owner is a team, set once"}]},
        "tags": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 32,
            "x-kubernetes-validations": [{"rule": "self.matches('^[a-z]+$')"}]}}
    }})
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    object(
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_are_enforced_on_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "cel");
    let c = kube_client(&gw.kubeconfig()).await;
    let status = json!({"type": "object", "properties": {"phase": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.phase in ['Pending', 'Ready']"}]});
    crds(&c)
        .create(
            &PostParams::default(),
            &crd("Widget", "widgets", widget_spec(), status),
        )
        .await
        .expect("a CRD with good rules is accepted");
    let api: Api<DynamicObject> = Api::namespaced_with(
        c.clone(),
        "default",
        &resource(GROUP, "v1", "Widget", "widgets"),
    );
    served(&api).await;
    let pp = PostParams::default();

    // Create.
    let good = json!({"min": 1, "max": 3, "replicas": 2, "mode": "fast", "tags": ["a", "b"],
        "owner": "team-a"});
    api.create(&pp, &widget("w", good.clone())).await.unwrap();
    // Each refused create: its spec, then the message.
    let refused = [
        (
            json!({"min": 5, "max": 3, "replicas": 1}),
            r#"spec: Invalid value: "object": min must not exceed max"#,
        ),
        (
            json!({"min": 1, "max": 3, "replicas": 1, "tags": ["ok", "Not-OK"]}),
            r#"spec.tags[1]: Invalid value: "string": failed rule: self.matches('^[a-z]+$')"#,
        ),
        (
            json!({"min": 5, "max": 3, "replicas": 1, "legacy": "x"}),
            r#"[spec: Invalid value: "object": min must not exceed max, spec: Forbidden: legacy is gone]"#,
        ),
        (
            json!({"min": 1, "max": 3, "replicas": 1, "owner": "bob"}),
            r#"spec.owner: Invalid value: "string": owner is a team, set once"#,
        ),
    ];
    for (spec, want) in refused {
        let msg = invalid(api.create(&pp, &widget("bad", spec)).await);
        assert_eq!(
            msg,
            format!(r#"Widget.cel.example.com "bad" is invalid: {want}"#)
        );
    }

    // Update: a transition rule with its messageExpression, at its fieldPath.
    let mut current = api.get("w").await.unwrap();
    current.data["spec"]["replicas"] = json!(1);
    let msg = invalid(api.replace("w", &pp, &current).await);
    assert_eq!(
        msg,
        r#"Widget.cel.example.com "w" is invalid: spec.replicas: Invalid value: "object": replicas may not shrink from 2 to 1"#
    );
    current.data["spec"]["replicas"] = json!(4);
    api.replace("w", &pp, &current).await.unwrap();

    // Patch: merge and JSON.
    let msg = invalid(merge(&api, "w", false, json!({"spec": {"owner": "team-b"}})).await);
    assert!(
        msg.ends_with("spec.owner: Invalid value: \"string\": owner is a team, set once"),
        "{msg}"
    );
    let msg = invalid(merge(&api, "w", false, json!({"spec": {"mode": "slow"}})).await);
    assert_eq!(
        msg,
        r#"Widget.cel.example.com "w" is invalid: spec.mode: Invalid value: "string": mode is immutable"#
    );
    let msg = invalid(
        api.patch(
            "w",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "replace", "path": "/spec/min", "value": 9}]))
                    .unwrap(),
            ),
        )
        .await,
    );
    assert!(
        msg.ends_with("spec: Invalid value: \"object\": min must not exceed max"),
        "{msg}"
    );
    merge(&api, "w", false, json!({"spec": {"max": 10, "min": 9}}))
        .await
        .expect("a patch within the rules");

    // Server-side apply, creating and updating.
    let ssa = PatchParams::apply("cel-test").force();
    let applied = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
        "metadata": {"name": "applied", "namespace": "default"},
        "spec": {"min": 2, "max": 1, "replicas": 1}});
    let msg = invalid(api.patch("applied", &ssa, &Patch::Apply(&applied)).await);
    assert!(msg.ends_with("min must not exceed max"), "{msg}");
    let mut fixed = applied.clone();
    fixed["spec"]["max"] = json!(2);
    api.patch("applied", &ssa, &Patch::Apply(&fixed))
        .await
        .expect("an apply within the rules");
    fixed["spec"]["replicas"] = json!(0);
    let msg = invalid(api.patch("applied", &ssa, &Patch::Apply(&fixed)).await);
    assert!(
        msg.ends_with("replicas may not shrink from 1 to 0"),
        "{msg}"
    );

    // The status subresource.
    let msg = invalid(merge(&api, "w", true, json!({"status": {"phase": "Bogus"}})).await);
    assert_eq!(
        msg,
        r#"Widget.cel.example.com "w" is invalid: status: Invalid value: "object": failed rule: self.phase in ['Pending', 'Ready']"#
    );
    merge(&api, "w", true, json!({"status": {"phase": "Ready"}}))
        .await
        .expect("a status within the rules");
    // What was refused was not stored.
    let stored = api.get("w").await.unwrap();
    assert_eq!(stored.data["spec"]["mode"], "fast");
    assert_eq!(stored.data["spec"]["replicas"], 4);
    assert_eq!(stored.data["status"]["phase"], "Ready");
    assert!(api.get_opt("bad").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn costly_or_broken_rules_and_conditions_are_refused_on_write() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "celcrd");
    let c = kube_client(&gw.kubeconfig()).await;
    let pp = PostParams::default();
    let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";

    let costly = json!({"type": "object", "properties": {"list": {"type": "array",
        "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.exists(y, x == y))"}]}}});
    let msg = invalid(create_crd(&c, "Costly", "costlies", costly).await);
    assert!(
        msg.starts_with(&format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"costlies.{GROUP}\" is invalid: \
             {at}.properties[list].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost \
             exceeds budget by factor of more than 100x (estimated cost "
        )),
        "{msg}"
    );

    // Rules that do not compile, or select a field the schema lacks: kind, rule, why.
    let broken = [
        ("Broken", "self.min <=", "compilation failed: "),
        (
            "Typo",
            "self.mni <= 1",
            "compilation failed: undefined field 'mni'",
        ),
    ];
    for (kind, rule, why) in broken {
        let schema = json!({"type": "object", "x-kubernetes-validations": [{"rule": rule}],
            "properties": {"min": {"type": "integer"}}});
        let plural = format!("{}s", kind.to_lowercase());
        let msg = invalid(create_crd(&c, kind, &plural, schema).await);
        let want =
            format!("{at}.x-kubernetes-validations[0].rule: Invalid value: \"{rule}\": {why}");
        assert!(msg.contains(&want), "{msg}");
    }
    for name in ["costlies", "brokens", "typos"] {
        let stored = crds(&c).get_opt(&format!("{name}.{GROUP}")).await.unwrap();
        assert!(stored.is_none(), "{name} was stored");
    }

    // A good CRD cannot be updated to a costly rule.
    let bounded = json!({"type": "object", "properties": {"list": {"type": "array",
        "maxItems": 8, "items": {"type": "string", "maxLength": 8},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.exists_one(y, x == y))"}]}}});
    let created = create_crd(&c, "Bounded", "boundeds", bounded)
        .await
        .expect("nested comprehensions over bounded lists are cheap");
    let mut unbounded = created.clone();
    let list = &mut unbounded.data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"]["list"];
    list.as_object_mut().unwrap().remove("maxItems");
    let msg = invalid(
        crds(&c)
            .replace(&format!("boundeds.{GROUP}"), &pp, &unbounded)
            .await,
    );
    assert!(
        msg.contains("Forbidden: estimated rule cost exceeds budget"),
        "{msg}"
    );

    // Webhook configurations: a costly, a broken and an authorizer condition.
    let configs: Api<DynamicObject> = Api::all_with(
        c.clone(),
        &resource(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    let config = |expression: &str| {
        object(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "conditions"},
            "webhooks": [{"name": "check.cel.example.com", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}],
                "matchConditions": [{"name": "only", "expression": expression}]}]
        }))
    };
    let prefix = "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"conditions\" is invalid: \
                  webhooks[0].matchConditions[0].expression: ";
    let msg = invalid(
        configs
            .create(
                &pp,
                &config("object.data.all(k, object.data.exists(j, k == j))"),
            )
            .await,
    );
    assert!(
        msg.starts_with(&format!(
            "{prefix}Forbidden: estimated expression cost exceeds budget by factor of more than 100x (estimated cost "
        )),
        "{msg}"
    );
    let msg = invalid(configs.create(&pp, &config("object.(")).await);
    assert!(
        msg.starts_with(&format!(
            "{prefix}Invalid value: \"object.(\": compilation failed: "
        )),
        "{msg}"
    );
    let authz = "authorizer.requestResource.check('get').allowed()";
    let msg = invalid(configs.create(&pp, &config(authz)).await);
    assert_eq!(
        msg,
        format!(
            "{prefix}Invalid value: \"{authz}\": the authorizer variable is not supported by the embedded cluster"
        )
    );
    configs
        .create(&pp, &config("object.metadata.name.startsWith('x')"))
        .await
        .expect("a cheap condition is accepted");
}

/// The most the gateway's resident memory may grow while a large object is checked: the
/// 16 MiB body, its parsed form and its CEL form, with room for the allocator.
const GROWTH_BOUND_MB: f64 = 1200.0;
/// How many items the large object has.
const ITEMS: usize = 3_000_000;

#[tokio::test(flavor = "multi_thread")]
async fn a_large_object_against_a_rule_is_answered_in_bounded_time_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "celbig");
    let pid = gw.pid().expect("the gateway's pid");
    let c = kube_client(&gw.kubeconfig()).await;
    let pp = PostParams::default();

    // A rule quadratic at run time is refused outright.
    let quadratic = json!({"type": "object", "properties": {"items": {"type": "array",
        "items": {"type": "integer"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x <= y || x > y))"}]}}});
    let msg = invalid(create_crd(&c, "Square", "squares", quadratic).await);
    assert!(msg.contains("estimated rule cost exceeds budget"), "{msg}");

    // Linear rules over an unbounded list are accepted, as kube-apiserver accepts them; the
    // same list without rules is the control.
    let list = |rules: bool| {
        let (item, list) = if rules {
            (
                json!([{"rule": "self >= 0"}]),
                json!([{"rule": "self.all(x, x < 1000)"}]),
            )
        } else {
            (json!([]), json!([]))
        };
        json!({"type": "object", "properties": {"items": {"type": "array",
            "items": {"type": "integer", "x-kubernetes-validations": item},
            "x-kubernetes-validations": list}}})
    };
    let mut apis = Vec::new();
    for (kind, plural, rules) in [("Bulk", "bulks", true), ("Plain", "plains", false)] {
        create_crd(&c, kind, plural, list(rules))
            .await
            .expect("linear rules are accepted");
        let api: Api<DynamicObject> =
            Api::namespaced_with(c.clone(), "default", &resource(GROUP, "v1", kind, plural));
        served(&api).await;
        apis.push(api);
    }
    let (api, plain) = (apis[0].clone(), apis[1].clone());

    // Millions of items (~6 MiB), the last one breaking the item rule.
    let mut items = vec![json!(1); ITEMS - 1];
    items.push(json!(-1));
    let big = |kind: &str| {
        object(json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind,
            "metadata": {"name": "big", "namespace": "default"}, "spec": {"items": items}}))
    };
    let started = Instant::now();
    plain
        .create(&pp, &big("Plain"))
        .await
        .expect("the control is stored");
    let control = started.elapsed();
    let big = big("Bulk");

    let baseline = proc_status_mb(pid, "VmRSS");
    let started = Instant::now();
    let write = tokio::spawn({
        let api = api.clone();
        async move { api.create(&PostParams::default(), &big).await }
    });
    // Meanwhile: the server's memory, and that it still answers others promptly.
    let mut peak = baseline;
    let mut slowest_other = Duration::ZERO;
    let namespaces: Api<DynamicObject> =
        Api::all_with(c.clone(), &resource("", "v1", "Namespace", "namespaces"));
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    while !write.is_finished() {
        tick.tick().await;
        let rss = proc_status_mb(pid, "VmRSS");
        peak = peak.max(rss);
        if rss - baseline > GROWTH_BOUND_MB {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("the gateway grew by {:.0} MB under attack", rss - baseline);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the write was not answered within 60 s"
        );
        let asked = Instant::now();
        namespaces.get("default").await.expect("others are served");
        slowest_other = slowest_other.max(asked.elapsed());
    }
    let took = started.elapsed();
    let msg = invalid(write.await.unwrap());
    eprintln!(
        "a {ITEMS}-item write answered in {took:?} (without rules: {control:?}; 422: {msg:.200}); \
         the gateway grew by {:.0} MB; the slowest other request took {slowest_other:?}",
        peak - baseline
    );
    let last = format!(
        "spec.items[{}]: Invalid value: \"integer\": failed rule: self >= 0",
        ITEMS - 1
    );
    assert!(
        msg.contains(
            "spec.items: Invalid value: \"array\": call cost exceeds limit for rule: self.all(x, x < 1000) \
             (the value is larger than the 3145728 bytes rules are estimated for)"
        ),
        "{msg}"
    );
    assert!(
        msg.contains(&last) || msg.contains("validation rules ran out of their 1s"),
        "{msg}"
    );
    // The rules add at most their deadline and its grace, with room for a busy machine.
    assert!(
        took < control + Duration::from_secs(10),
        "{took:?} against {control:?}"
    );
    assert!(slowest_other < Duration::from_secs(5), "{slowest_other:?}");
    assert!(api.get_opt("big").await.unwrap().is_none());

    // The list is larger than rule costs are estimated for: that rule is not run at all, and
    // the items' rules stop at the deadline, so nothing runs on past it.
    let log = std::fs::read_to_string(gw.log_path()).unwrap_or_default();
    assert!(
        !log.contains("validation rules ran past their deadline"),
        "{log}"
    );
    let small = object(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Bulk",
        "metadata": {"name": "small", "namespace": "default"}, "spec": {"items": [1, 2, 3]}}));
    api.create(&pp, &small)
        .await
        .expect("a small write is served after the attack");
}
