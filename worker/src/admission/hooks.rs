//! The webhooks the worker serves: each one's path, name and rule, in one table, so that what
//! is served and what is registered cannot drift apart.

use serde_json::{Value, json};

/// One webhook the worker serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    /// Completes a Pod's accelerator requests (units, credits) before Kueue reads them.
    PodMutate,
    /// Refuses Pods whose accelerator requests break the family rules.
    PodValidate,
    /// Completes an InstanceType's defaults.
    InstanceTypeMutate,
    /// Refuses invalid InstanceTypes and changes to immutable fields.
    InstanceTypeValidate,
    /// Completes an Instance's defaults from its type (host CPU and memory, storage).
    InstanceMutate,
    /// Refuses invalid Instances and changes not allowed while running.
    InstanceValidate,
    /// Pins a Kueue Workload's fit to the flavors its Pod can use.
    WorkloadMutate,
    /// Lets only the model manager of a node write that node's NodeModelStore status.
    ModelStoreStatus,
}

impl Hook {
    /// Every webhook, in the order they are registered.
    pub const ALL: [Hook; 8] = [
        Hook::PodMutate,
        Hook::PodValidate,
        Hook::InstanceTypeMutate,
        Hook::InstanceTypeValidate,
        Hook::InstanceMutate,
        Hook::InstanceValidate,
        Hook::WorkloadMutate,
        Hook::ModelStoreStatus,
    ];

    /// The URL path the webhook is served on (and registered with).
    pub fn path(self) -> &'static str {
        match self {
            Hook::PodMutate => "/mutate-gpustack-worker-core-v1-pod",
            Hook::PodValidate => "/validate-gpustack-worker-core-v1-pod",
            Hook::InstanceTypeMutate => "/mutate-worker-gpustack-ai-v1alpha1-instancetype",
            Hook::InstanceTypeValidate => "/validate-worker-gpustack-ai-v1alpha1-instancetype",
            Hook::InstanceMutate => "/mutate-worker-gpustack-ai-v1alpha1-instance",
            Hook::InstanceValidate => "/validate-worker-gpustack-ai-v1alpha1-instance",
            Hook::WorkloadMutate => "/mutate-kueue-x-k8s-io-v1beta2-workload",
            Hook::ModelStoreStatus => "/validate-worker-gpustack-ai-v1alpha1-nodemodelstore-status",
        }
    }

    /// The webhook's name in its configuration (and the `webhook` label of the metrics).
    pub fn name(self) -> &'static str {
        match self {
            Hook::PodMutate => "pod.mutation.worker.gpustack.ai",
            Hook::PodValidate => "pod.validation.worker.gpustack.ai",
            Hook::InstanceTypeMutate => "instancetype.mutation.worker.gpustack.ai",
            Hook::InstanceTypeValidate => "instancetype.validation.worker.gpustack.ai",
            Hook::InstanceMutate => "instance.mutation.worker.gpustack.ai",
            Hook::InstanceValidate => "instance.validation.worker.gpustack.ai",
            Hook::WorkloadMutate => "workload.mutation.worker.gpustack.ai",
            Hook::ModelStoreStatus => "nodemodelstore-status.validation.worker.gpustack.ai",
        }
    }

    /// Whether the webhook is registered as mutating (else validating).
    pub fn mutating(self) -> bool {
        matches!(
            self,
            Hook::PodMutate
                | Hook::InstanceTypeMutate
                | Hook::InstanceMutate
                | Hook::WorkloadMutate
        )
    }

    /// Whether the webhook judges UPDATEs of objects being deleted; the others let them pass
    /// (a finalizer's removal must never be refused for a rule about the spec).
    pub fn receives_deletion_updates(self) -> bool {
        // Who writes a store's status matters to the end.
        matches!(self, Hook::ModelStoreStatus)
    }

    /// The Workload fit pin is an optimisation: a worker that is down must not stop Kueue.
    fn failure_policy(self) -> &'static str {
        match self {
            Hook::WorkloadMutate => "Ignore",
            _ => "Fail",
        }
    }

    /// The `rules`, `objectSelector` and `matchConditions` of the webhook.
    fn matching(self) -> Value {
        let rule = |group: &str, version: &str, resource: &str, ops: &[&str], scope: &str| {
            json!([{"apiGroups": [group], "apiVersions": [version], "resources": [resource],
                    "operations": ops, "scope": scope}])
        };
        let group = gpustack_api::labels::WORKER_GROUP;
        match self {
            // The units are computed once, on CREATE; the validating half also sees every
            // UPDATE (and in-place resize) so that nothing admitted changes afterwards.
            Hook::PodMutate => json!({
                "rules": rule("", "v1", "pods", &["CREATE"], "Namespaced"),
                "objectSelector": {"matchExpressions": [
                    {"key": gpustack_api::kueue::QUEUE_NAME_LABEL, "operator": "Exists"},
                ]},
            }),
            Hook::PodValidate => json!({
                "rules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                     "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"},
                    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/resize"],
                     "operations": ["UPDATE"], "scope": "Namespaced"},
                ],
                "objectSelector": {"matchExpressions": [
                    {"key": gpustack_api::kueue::QUEUE_NAME_LABEL, "operator": "Exists"},
                ]},
            }),
            Hook::InstanceTypeMutate | Hook::InstanceTypeValidate => json!({
                "rules": rule(group, "v1alpha1", "instancetypes", &["CREATE", "UPDATE"], "Cluster"),
            }),
            Hook::InstanceMutate | Hook::InstanceValidate => json!({
                "rules": rule(group, "v1alpha1", "instances", &["CREATE", "UPDATE"], "Namespaced"),
            }),
            Hook::WorkloadMutate => json!({
                "rules": rule(gpustack_api::kueue::GROUP, gpustack_api::kueue::VERSION, "workloads", &["CREATE", "UPDATE"], "Namespaced"),
                // Only queued Workloads: which of them go to a pool of the worker is known from
                // their LocalQueue's ClusterQueue, which the handler reads (a user's LocalQueue
                // may point at the worker's ClusterQueue under any name).
                "matchConditions": [{
                    "name": "gpustack-queued",
                    "expression": "has(object.spec.queueName) && object.spec.queueName != ''",
                }],
            }),
            Hook::ModelStoreStatus => json!({
                "rules": rule(group, "v1alpha1", "nodemodelstores/status", &["UPDATE"], "Cluster"),
            }),
        }
    }

    /// The webhook's entry in its configuration.
    pub fn entry(self, namespace: &str, service: &str, port: u16, ca_bundle: &str) -> Value {
        let mut w = json!({
            "name": self.name(),
            "clientConfig": {
                "service": {"namespace": namespace, "name": service, "port": port, "path": self.path()},
                "caBundle": ca_bundle,
            },
            "failurePolicy": self.failure_policy(),
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": 10,
            "admissionReviewVersions": ["v1"],
        });
        if self.mutating() {
            w["reinvocationPolicy"] = json!("Never");
        }
        if let (Some(w), Value::Object(m)) = (w.as_object_mut(), self.matching()) {
            w.extend(m);
        }
        w
    }

    /// The webhook served on `path`, if any.
    pub fn from_path(path: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|h| h.path() == path)
    }
}

/// The two configurations. Their names sort before Kueue's (`kueue-…`), so that a Pod's
/// credits are computed before Kueue's own Pod webhook reads them.
pub const MUTATION: &str = "gpustack-worker-mutation";
/// The name of the ValidatingWebhookConfiguration.
pub const VALIDATION: &str = "gpustack-worker-validation";

/// `(kind, plural, object)` of each configuration.
pub fn configurations(
    namespace: &str,
    service: &str,
    port: u16,
    ca_bundle: &str,
) -> Vec<(&'static str, &'static str, Value)> {
    let labels = json!({"app.kubernetes.io/managed-by": "gpustack-operator"});
    let of = |mutating: bool| -> Vec<Value> {
        Hook::ALL
            .into_iter()
            .filter(|h| h.mutating() == mutating)
            .map(|h| h.entry(namespace, service, port, ca_bundle))
            .collect()
    };
    vec![
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                   "metadata": {"name": MUTATION, "labels": labels}, "webhooks": of(true)}),
        ),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": VALIDATION, "labels": labels}, "webhooks": of(false)}),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_as_the_issue_says() {
        assert!(MUTATION < "kueue-mutating-webhook-configuration");
        let cfgs = configurations("gpustack-system", "gpustack-operator-worker", 443, "Q0E=");
        let mutation = &cfgs[0].2;
        let validation = &cfgs[1].2;
        assert_eq!(mutation["metadata"]["name"], MUTATION);
        assert_eq!(validation["metadata"]["name"], VALIDATION);
        for w in mutation["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .chain(validation["webhooks"].as_array().unwrap())
        {
            assert_eq!(w["sideEffects"], "None");
            assert_eq!(w["matchPolicy"], "Equivalent");
            assert_eq!(w["timeoutSeconds"], 10);
            assert_eq!(w["admissionReviewVersions"], json!(["v1"]));
            assert_eq!(w["clientConfig"]["caBundle"], "Q0E=");
            assert_eq!(
                w["clientConfig"]["service"]["name"],
                "gpustack-operator-worker"
            );
            let hook =
                Hook::from_path(w["clientConfig"]["service"]["path"].as_str().unwrap()).unwrap();
            assert_eq!(w["name"], hook.name());
            let policy = if hook == Hook::WorkloadMutate {
                "Ignore"
            } else {
                "Fail"
            };
            assert_eq!(w["failurePolicy"], policy, "{}", hook.name());
        }
        let pod = &mutation["webhooks"][0];
        assert_eq!(
            pod["clientConfig"]["service"]["path"],
            "/mutate-gpustack-worker-core-v1-pod"
        );
        assert_eq!(
            pod["objectSelector"]["matchExpressions"][0]["operator"],
            "Exists"
        );
        assert_eq!(mutation["webhooks"].as_array().unwrap().len(), 4);
        assert_eq!(validation["webhooks"].as_array().unwrap().len(), 4);
        assert_eq!(
            validation["webhooks"][3]["rules"][0]["resources"],
            json!(["nodemodelstores/status"])
        );
    }
}
