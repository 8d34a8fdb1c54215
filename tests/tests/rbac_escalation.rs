//! RBAC escalation, attacked through the real `worker-gateway --embedded-cluster` with kubectl as
//! ServiceAccounts holding ordinary roles: a user allowed only to create bindings cannot bind
//! `cluster-admin` to itself, and a user allowed to edit ClusterRoles cannot write `*/*/*` into
//! one that aggregates into `view`; what they hold they may still grant, and an admin, or a user
//! with `bind` on the role, may bind it.

use std::path::{Path, PathBuf};

use gpustack_tests::embedded::{GatewayProcess, kubectl_with, with_token};

/// A kubeconfig for the ServiceAccount `default/<name>` with `rules` bound cluster-wide.
fn account(gw: &GatewayProcess, dir: &Path, name: &str, rules: &str) -> PathBuf {
    let manifest = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: default}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {name}}}\nrules: {rules}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {name}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}\n\
         subjects: [{{kind: ServiceAccount, name: {name}, namespace: default}}]\n"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, manifest).unwrap();
    gw.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    let token = gw.kubectl_ok(&["create", "token", name, "-n", "default"]);
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    with_token(&gw.kubeconfig(), token.trim(), &kubeconfig);
    kubeconfig
}

/// kubectl as the holder of `kubeconfig`: (succeeded, stdout + stderr).
fn as_user(kubeconfig: &Path, cache: &Path, args: &[&str]) -> (bool, String) {
    let out = kubectl_with(
        &[
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--cache-dir={}", cache.display()),
        ],
        args,
    )
    .output()
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

const BINDER: &str = "[{apiGroups: [rbac.authorization.k8s.io], resources: [clusterrolebindings, rolebindings], verbs: [create, get, list]}, {apiGroups: [''], resources: [pods], verbs: [get, list]}]";

#[test]
fn a_binder_cannot_bind_cluster_admin_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "rbac");
    let mallory = account(&gw, dir.path(), "mallory", BINDER);
    let cache = dir.path().join("cache-mallory");

    let (ok, text) = as_user(
        &mallory,
        &cache,
        &[
            "create",
            "clusterrolebinding",
            "mine",
            "--clusterrole=cluster-admin",
            "--serviceaccount=default:mallory",
        ],
    );
    assert!(!ok, "the binding was created: {text}");
    assert!(
        text.contains("is attempting to grant RBAC permissions not currently held"),
        "{text}"
    );
    // Nothing was stored, and mallory still cannot read Secrets.
    assert!(
        !gw.kubectl(&["get", "clusterrolebinding", "mine"])
            .status
            .success()
    );
    let (ok, text) = as_user(&mallory, &cache, &["get", "secrets", "-A"]);
    assert!(!ok && text.contains("Forbidden"), "{text}");
    // The same in a namespace, through a RoleBinding to cluster-admin.
    let (ok, text) = as_user(
        &mallory,
        &cache,
        &[
            "create",
            "rolebinding",
            "mine",
            "-n",
            "default",
            "--clusterrole=cluster-admin",
            "--serviceaccount=default:mallory",
        ],
    );
    assert!(!ok, "the role binding was created: {text}");

    // What she holds she may grant: reading pods.
    gw.kubectl_ok(&[
        "create",
        "clusterrole",
        "pod-reader",
        "--verb=get,list",
        "--resource=pods",
    ]);
    let (ok, text) = as_user(
        &mallory,
        &cache,
        &[
            "create",
            "clusterrolebinding",
            "readers",
            "--clusterrole=pod-reader",
            "--serviceaccount=default:someone",
        ],
    );
    assert!(ok, "binding a role she holds: {text}");

    // With `bind` on cluster-admin (and only on it), the binding is hers to make.
    gw.kubectl_ok(&[
        "create",
        "clusterrole",
        "may-bind-admin",
        "--verb=bind",
        "--resource=clusterroles",
        "--resource-name=cluster-admin",
    ]);
    gw.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "mallory-may-bind",
        "--clusterrole=may-bind-admin",
        "--serviceaccount=default:mallory",
    ]);
    let (ok, text) = as_user(
        &mallory,
        &cache,
        &[
            "create",
            "clusterrolebinding",
            "granted",
            "--clusterrole=cluster-admin",
            "--serviceaccount=default:someone",
        ],
    );
    assert!(ok, "binding with the bind verb: {text}");
}

const ROLE_EDITOR: &str = "[{apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [create, get, list, update, patch]}, {apiGroups: [''], resources: [configmaps], verbs: [get, list]}]";

#[test]
fn a_role_editor_cannot_grant_view_holders_everything() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "rbac");
    let eve = account(&gw, dir.path(), "eve", ROLE_EDITOR);
    let viewer = account(
        &gw,
        dir.path(),
        "viewer",
        "[{apiGroups: [''], resources: [namespaces], verbs: [get]}]",
    );
    gw.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "viewer-views",
        "--clusterrole=view",
        "--serviceaccount=default:viewer",
    ]);
    let cache = dir.path().join("cache-eve");

    // A new ClusterRole with */*/*, labelled to aggregate into `view`.
    let evil = dir.path().join("evil.yaml");
    std::fs::write(
        &evil,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: evil\n  labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}\nrules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]\n",
    )
    .unwrap();
    let (ok, text) = as_user(&eve, &cache, &["create", "-f", evil.to_str().unwrap()]);
    assert!(!ok, "the ClusterRole was created: {text}");
    assert!(text.contains("not currently held"), "{text}");

    // Or an innocent one she holds, then widened by a patch.
    gw.kubectl_ok(&[
        "create",
        "clusterrole",
        "innocent",
        "--verb=get",
        "--resource=configmaps",
    ]);
    let (ok, text) = as_user(
        &eve,
        &cache,
        &[
            "patch",
            "clusterrole",
            "innocent",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"rbac.authorization.k8s.io/aggregate-to-view":"true"}},"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}"#,
        ],
    );
    assert!(!ok, "the patch was stored: {text}");
    // An aggregation rule of her own gathers anything: refused too.
    let gather = dir.path().join("gather.yaml");
    std::fs::write(
        &gather,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: gather}\naggregationRule: {clusterRoleSelectors: [{matchLabels: {kubernetes.io/bootstrapping: rbac-defaults}}]}\nrules: []\n",
    )
    .unwrap();
    let (ok, text) = as_user(&eve, &cache, &["create", "-f", gather.to_str().unwrap()]);
    assert!(!ok && text.contains("aggregationRule"), "{text}");

    // The viewer still cannot delete anything.
    let (ok, text) = as_user(
        &viewer,
        &dir.path().join("cache-viewer"),
        &["delete", "namespace", "default", "--dry-run=server"],
    );
    assert!(!ok && text.contains("Forbidden"), "{text}");

    // Within what she holds, she may edit roles.
    let (ok, text) = as_user(
        &eve,
        &cache,
        &[
            "create",
            "clusterrole",
            "cm-reader",
            "--verb=get,list",
            "--resource=configmaps",
        ],
    );
    assert!(ok, "a role she holds: {text}");
}

#[test]
fn impersonation_is_checked_then_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "rbac");
    account(
        &gw,
        dir.path(),
        "viewer",
        "[{apiGroups: [''], resources: [configmaps], verbs: [get, list]}]",
    );
    let viewer = "--as=system:serviceaccount:default:viewer";

    // The admin acting as the viewer gets the viewer's answers, not its own.
    let out = gw.kubectl(&["auth", "can-i", "delete", "namespaces", viewer]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
    let out = gw.kubectl(&["auth", "can-i", "list", "configmaps", viewer]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "yes");
    let out = gw.kubectl(&["get", "secrets", "-A", viewer]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "User \"system:serviceaccount:default:viewer\" cannot list resource \"secrets\""
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // One who may not impersonate is refused, whoever it asks to be (read raw: kubectl's
    // discovery, refused first, hides the message).
    let mallory = account(&gw, dir.path(), "mallory", BINDER);
    let cache = dir.path().join("cache-mallory");
    let (ok, text) = as_user(
        &mallory,
        &cache,
        &["get", "--raw", "/api/v1/secrets", "--as=admin"],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("cannot impersonate resource \"users\""),
        "{text}"
    );
    let (ok, text) = as_user(
        &mallory,
        &cache,
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods",
            "--as=jane",
            "--as-group=system:masters",
        ],
    );
    assert!(!ok && text.contains("impersonate"), "{text}");

    // Allowed to impersonate jane (and only her), mallory acts as jane.
    gw.kubectl_ok(&[
        "create",
        "clusterrole",
        "be-jane",
        "--verb=impersonate",
        "--resource=users",
        "--resource-name=jane",
    ]);
    gw.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "mallory-is-jane",
        "--clusterrole=be-jane",
        "--serviceaccount=default:mallory",
    ]);
    let (ok, text) = as_user(
        &mallory,
        &cache,
        &["auth", "whoami", "--as=jane", "-o", "json"],
    );
    assert!(ok, "{text}");
    assert!(text.contains("\"username\": \"jane\""), "{text}");
    let (ok, text) = as_user(
        &mallory,
        &cache,
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods",
            "--as=jane",
        ],
    );
    assert!(!ok && text.contains("User \"jane\" cannot list"), "{text}");
}

/// The bootstrap roles nest as kube-apiserver's do: a namespace `edit`or may read the Pods it
/// may create, an `admin` may too, and a `view`er may read but not write.
#[test]
fn admin_edit_and_view_nest() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "rbac");
    for (who, role) in [("ed", "edit"), ("ad", "admin"), ("vi", "view")] {
        gw.kubectl_ok(&["create", "serviceaccount", who, "-n", "default"]);
        gw.kubectl_ok(&[
            "create",
            "rolebinding",
            who,
            "-n",
            "default",
            &format!("--clusterrole={role}"),
            &format!("--serviceaccount=default:{who}"),
        ]);
    }
    let can = |who: &str, verb: &str| {
        let out = gw.kubectl(&[
            "auth",
            "can-i",
            verb,
            "pods",
            "-n",
            "default",
            &format!("--as=system:serviceaccount:default:{who}"),
        ]);
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    // Aggregation settles in the background: wait for the widest role to have its rules.
    gpustack_tests::wait::wait_until(
        "admin to be aggregated",
        gpustack_tests::embedded::DEADLINE,
        || can("ad", "get").then_some(()),
    );
    for verb in ["get", "list", "create", "delete"] {
        assert!(can("ed", verb), "edit may {verb} pods");
        assert!(can("ad", verb), "admin may {verb} pods");
    }
    assert!(can("vi", "get") && can("vi", "list"));
    assert!(!can("vi", "create") && !can("vi", "delete"));
}
