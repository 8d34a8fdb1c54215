//! Who may write a `NodeModelStore`'s status: the model-manager of that node, identified by its
//! service account and a token bound to its Pod on that node (the node name the token carries,
//! or the node its Pod runs on). Cluster admins (`system:masters`) may too, as they may remove
//! the webhook anyway.

use std::collections::BTreeMap;

use super::{reasons::Reason, verdict::Refusal};

/// The `extra` keys of a pod-bound service account token.
pub const POD_NAME: &str = "authentication.kubernetes.io/pod-name";
/// The `extra` key a pod-bound token carries its node's name under.
pub const NODE_NAME: &str = "authentication.kubernetes.io/node-name";

/// The writer, as the review names it.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    /// The user name.
    pub username: String,
    /// The groups.
    pub groups: Vec<String>,
    /// The extra attributes (a pod-bound token's pod and node names).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Writer {
    fn first(&self, key: &str) -> Option<&str> {
        self.extra
            .get(key)?
            .first()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// The Pod the token is bound to, when it is.
    pub fn pod(&self) -> Option<&str> {
        self.first(POD_NAME)
    }

    /// The node the token names, when it does.
    pub fn node(&self) -> Option<&str> {
        self.first(NODE_NAME)
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// What the handler must find out before judging: the node of the writer's Pod, unless the
/// token already names it.
pub fn needs_pod_lookup(w: &Writer, allowed_user: &str) -> Option<String> {
    (w.username == allowed_user && w.node().is_none())
        .then(|| w.pod().map(str::to_owned))
        .flatten()
}

/// Whether `w` may write the status of the store of node `store_node`; `pod_node` is where the
/// writer's Pod runs, when it had to be looked up.
pub fn check(
    w: &Writer,
    allowed_user: &str,
    store_node: &str,
    pod_node: Option<&str>,
) -> Result<(), Refusal> {
    if w.groups.iter().any(|g| g == "system:masters") {
        return Ok(());
    }
    let refuse = |why: String| Err(Refusal::forbidden(Reason::WriterNotAllowed, why));
    if w.username != allowed_user {
        return refuse(format!(
            "only {allowed_user} may write the status of NodeModelStore {store_node}, not {}",
            w.username
        ));
    }
    if w.pod().is_none() {
        return refuse(format!(
            "{allowed_user} must write NodeModelStore status with a token bound to its Pod"
        ));
    }
    match w.node().or(pod_node) {
        Some(node) if node == store_node => Ok(()),
        Some(node) => refuse(format!(
            "the model-manager on node {node} may not write the status of NodeModelStore {store_node}"
        )),
        None => refuse(format!(
            "the Pod {} of {allowed_user} runs on no known node",
            w.pod().unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SA: &str = "system:serviceaccount:gpustack-system:gpustack-operator-model-manager";

    fn writer(user: &str, pod: Option<&str>, node: Option<&str>) -> Writer {
        let mut extra = BTreeMap::new();
        if let Some(p) = pod {
            extra.insert(POD_NAME.to_owned(), vec![p.to_owned()]);
        }
        if let Some(n) = node {
            extra.insert(NODE_NAME.to_owned(), vec![n.to_owned()]);
        }
        Writer {
            username: user.into(),
            groups: vec!["system:serviceaccounts".into()],
            extra,
        }
    }

    #[test]
    fn only_the_model_manager_of_that_node() {
        assert_eq!(
            service_account_user("gpustack-system", "gpustack-operator-model-manager"),
            SA
        );
        let ok = |w: &Writer, pod_node| check(w, SA, "node-a", pod_node).is_ok();
        assert!(ok(&writer(SA, Some("mm-1"), Some("node-a")), None));
        assert!(ok(&writer(SA, Some("mm-1"), None), Some("node-a")));
        assert!(!ok(&writer(SA, Some("mm-1"), Some("node-b")), None));
        assert!(!ok(&writer(SA, Some("mm-1"), None), Some("node-b")));
        assert!(!ok(&writer(SA, Some("mm-1"), None), None));
        assert!(!ok(&writer(SA, None, Some("node-a")), None));
        let other = writer(
            "system:serviceaccount:default:default",
            Some("x"),
            Some("node-a"),
        );
        let e = check(&other, SA, "node-a", None).unwrap_err();
        assert_eq!((e.code, e.reason), (403, Reason::WriterNotAllowed));
        assert_eq!(
            e.message,
            format!(
                "only {SA} may write the status of NodeModelStore node-a, not system:serviceaccount:default:default"
            )
        );
        let admin = Writer {
            username: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        assert!(ok(&admin, None));
        assert_eq!(
            needs_pod_lookup(&writer(SA, Some("mm-1"), None), SA).as_deref(),
            Some("mm-1")
        );
        assert_eq!(
            needs_pod_lookup(&writer(SA, Some("mm-1"), Some("n")), SA),
            None
        );
        assert_eq!(needs_pod_lookup(&writer("x", Some("mm-1"), None), SA), None);
    }
}
