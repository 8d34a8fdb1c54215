//! The wire schema of Kubernetes' protobuf messages, generated from k8s-pb's prost structs
//! with JSON names from k8s-openapi by `cargo run -p gpustack-kube-rest --example
//! protobuf_schema`. Do not edit: regenerate. `agreement_tests.rs` checks it against
//! k8s-pb's types.

use super::table::{Kind, Message, Special, Ty::*, many, one};

pub(super) static MESSAGES: &[Message] = &[
    // 0
    Message { name: "api.admissionregistration.v1.AuditAnnotation", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "valueExpression", Str), ] },
    // 1
    Message { name: "api.admissionregistration.v1.ExpressionWarning", special: Special::Plain, fields: &[one(2, "fieldRef", Str), one(3, "warning", Str), ] },
    // 2
    Message { name: "api.admissionregistration.v1.MatchCondition", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "expression", Str), ] },
    // 3
    Message { name: "api.admissionregistration.v1.MatchResources", special: Special::Plain, fields: &[one(1, "namespaceSelector", Msg(717)), one(2, "objectSelector", Msg(717)), many(3, "resourceRules", Msg(7)), many(4, "excludeResourceRules", Msg(7)), one(7, "matchPolicy", Str), ] },
    // 4
    Message { name: "api.admissionregistration.v1.MutatingWebhook", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "clientConfig", Msg(26)), many(3, "rules", Msg(11)), one(4, "failurePolicy", Str), one(9, "matchPolicy", Str), one(5, "namespaceSelector", Msg(717)), one(11, "objectSelector", Msg(717)), one(6, "sideEffects", Str), one(7, "timeoutSeconds", I32), many(8, "admissionReviewVersions", Str), one(10, "reinvocationPolicy", Str), many(12, "matchConditions", Msg(2)), ] },
    // 5
    Message { name: "api.admissionregistration.v1.MutatingWebhookConfiguration", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "webhooks", Msg(4)), ] },
    // 6
    Message { name: "api.admissionregistration.v1.MutatingWebhookConfigurationList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(5)), ] },
    // 7
    Message { name: "api.admissionregistration.v1.NamedRuleWithOperations", special: Special::Plain, fields: &[many(1, "resourceNames", Str), one(2, "", Msg(11)), ] },
    // 8
    Message { name: "api.admissionregistration.v1.ParamKind", special: Special::Plain, fields: &[one(1, "apiVersion", Str), one(2, "kind", Str), ] },
    // 9
    Message { name: "api.admissionregistration.v1.ParamRef", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "namespace", Str), one(3, "selector", Msg(717)), one(4, "parameterNotFoundAction", Str), ] },
    // 10
    Message { name: "api.admissionregistration.v1.Rule", special: Special::Plain, fields: &[many(1, "apiGroups", Str), many(2, "apiVersions", Str), many(3, "resources", Str), one(4, "scope", Str), ] },
    // 11
    Message { name: "api.admissionregistration.v1.RuleWithOperations", special: Special::Plain, fields: &[many(1, "operations", Str), one(2, "", Msg(10)), ] },
    // 12
    Message { name: "api.admissionregistration.v1.ServiceReference", special: Special::Plain, fields: &[one(1, "namespace", Str), one(2, "name", Str), one(3, "path", Str), one(4, "port", I32), ] },
    // 13
    Message { name: "api.admissionregistration.v1.TypeChecking", special: Special::Plain, fields: &[many(1, "expressionWarnings", Msg(1)), ] },
    // 14
    Message { name: "api.admissionregistration.v1.ValidatingAdmissionPolicy", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(19)), one(3, "status", Msg(20)), ] },
    // 15
    Message { name: "api.admissionregistration.v1.ValidatingAdmissionPolicyBinding", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(17)), ] },
    // 16
    Message { name: "api.admissionregistration.v1.ValidatingAdmissionPolicyBindingList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(15)), ] },
    // 17
    Message { name: "api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec", special: Special::Plain, fields: &[one(1, "policyName", Str), one(2, "paramRef", Msg(9)), one(3, "matchResources", Msg(3)), many(4, "validationActions", Str), ] },
    // 18
    Message { name: "api.admissionregistration.v1.ValidatingAdmissionPolicyList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(14)), ] },
    // 19
    Message { name: "api.admissionregistration.v1.ValidatingAdmissionPolicySpec", special: Special::Plain, fields: &[one(1, "paramKind", Msg(8)), one(2, "matchConstraints", Msg(3)), many(3, "validations", Msg(24)), one(4, "failurePolicy", Str), many(5, "auditAnnotations", Msg(0)), many(6, "matchConditions", Msg(2)), many(7, "variables", Msg(25)), ] },
    // 20
    Message { name: "api.admissionregistration.v1.ValidatingAdmissionPolicyStatus", special: Special::Plain, fields: &[one(1, "observedGeneration", I64), one(2, "typeChecking", Msg(13)), many(3, "conditions", Msg(712)), ] },
    // 21
    Message { name: "api.admissionregistration.v1.ValidatingWebhook", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "clientConfig", Msg(26)), many(3, "rules", Msg(11)), one(4, "failurePolicy", Str), one(9, "matchPolicy", Str), one(5, "namespaceSelector", Msg(717)), one(10, "objectSelector", Msg(717)), one(6, "sideEffects", Str), one(7, "timeoutSeconds", I32), many(8, "admissionReviewVersions", Str), many(11, "matchConditions", Msg(2)), ] },
    // 22
    Message { name: "api.admissionregistration.v1.ValidatingWebhookConfiguration", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "webhooks", Msg(21)), ] },
    // 23
    Message { name: "api.admissionregistration.v1.ValidatingWebhookConfigurationList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(22)), ] },
    // 24
    Message { name: "api.admissionregistration.v1.Validation", special: Special::Plain, fields: &[one(1, "expression", Str), one(2, "message", Str), one(3, "reason", Str), one(4, "messageExpression", Str), ] },
    // 25
    Message { name: "api.admissionregistration.v1.Variable", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "expression", Str), ] },
    // 26
    Message { name: "api.admissionregistration.v1.WebhookClientConfig", special: Special::Plain, fields: &[one(3, "url", Str), one(1, "service", Msg(12)), one(2, "caBundle", Bytes), ] },
    // 27
    Message { name: "api.admissionregistration.v1alpha1.ApplyConfiguration", special: Special::Plain, fields: &[one(1, "expression", Str), ] },
    // 28
    Message { name: "api.admissionregistration.v1alpha1.JsonPatch", special: Special::Plain, fields: &[one(1, "expression", Str), ] },
    // 29
    Message { name: "api.admissionregistration.v1alpha1.MatchCondition", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "expression", Str), ] },
    // 30
    Message { name: "api.admissionregistration.v1alpha1.MatchResources", special: Special::Plain, fields: &[one(1, "namespaceSelector", Msg(717)), one(2, "objectSelector", Msg(717)), many(3, "resourceRules", Msg(38)), many(4, "excludeResourceRules", Msg(38)), one(7, "matchPolicy", Str), ] },
    // 31
    Message { name: "api.admissionregistration.v1alpha1.MutatingAdmissionPolicy", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(36)), ] },
    // 32
    Message { name: "api.admissionregistration.v1alpha1.MutatingAdmissionPolicyBinding", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(34)), ] },
    // 33
    Message { name: "api.admissionregistration.v1alpha1.MutatingAdmissionPolicyBindingList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(32)), ] },
    // 34
    Message { name: "api.admissionregistration.v1alpha1.MutatingAdmissionPolicyBindingSpec", special: Special::Plain, fields: &[one(1, "policyName", Str), one(2, "paramRef", Msg(40)), one(3, "matchResources", Msg(30)), ] },
    // 35
    Message { name: "api.admissionregistration.v1alpha1.MutatingAdmissionPolicyList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(31)), ] },
    // 36
    Message { name: "api.admissionregistration.v1alpha1.MutatingAdmissionPolicySpec", special: Special::Plain, fields: &[one(1, "paramKind", Msg(39)), one(2, "matchConstraints", Msg(30)), many(3, "variables", Msg(41)), many(4, "mutations", Msg(37)), one(5, "failurePolicy", Str), many(6, "matchConditions", Msg(29)), one(7, "reinvocationPolicy", Str), ] },
    // 37
    Message { name: "api.admissionregistration.v1alpha1.Mutation", special: Special::Plain, fields: &[one(2, "patchType", Str), one(3, "applyConfiguration", Msg(27)), one(4, "jsonPatch", Msg(28)), ] },
    // 38
    Message { name: "api.admissionregistration.v1alpha1.NamedRuleWithOperations", special: Special::Plain, fields: &[many(1, "resourceNames", Str), one(2, "", Msg(11)), ] },
    // 39
    Message { name: "api.admissionregistration.v1alpha1.ParamKind", special: Special::Plain, fields: &[one(1, "apiVersion", Str), one(2, "kind", Str), ] },
    // 40
    Message { name: "api.admissionregistration.v1alpha1.ParamRef", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "namespace", Str), one(3, "selector", Msg(717)), one(4, "parameterNotFoundAction", Str), ] },
    // 41
    Message { name: "api.admissionregistration.v1alpha1.Variable", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "expression", Str), ] },
    // 42
    Message { name: "api.admissionregistration.v1beta1.ApplyConfiguration", special: Special::Plain, fields: &[one(1, "expression", Str), ] },
    // 43
    Message { name: "api.admissionregistration.v1beta1.JsonPatch", special: Special::Plain, fields: &[one(1, "expression", Str), ] },
    // 44
    Message { name: "api.admissionregistration.v1beta1.MatchCondition", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "expression", Str), ] },
    // 45
    Message { name: "api.admissionregistration.v1beta1.MatchResources", special: Special::Plain, fields: &[one(1, "namespaceSelector", Msg(717)), one(2, "objectSelector", Msg(717)), many(3, "resourceRules", Msg(53)), many(4, "excludeResourceRules", Msg(53)), one(7, "matchPolicy", Str), ] },
    // 46
    Message { name: "api.admissionregistration.v1beta1.MutatingAdmissionPolicy", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(51)), ] },
    // 47
    Message { name: "api.admissionregistration.v1beta1.MutatingAdmissionPolicyBinding", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(49)), ] },
    // 48
    Message { name: "api.admissionregistration.v1beta1.MutatingAdmissionPolicyBindingList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(47)), ] },
    // 49
    Message { name: "api.admissionregistration.v1beta1.MutatingAdmissionPolicyBindingSpec", special: Special::Plain, fields: &[one(1, "policyName", Str), one(2, "paramRef", Msg(55)), one(3, "matchResources", Msg(45)), ] },
    // 50
    Message { name: "api.admissionregistration.v1beta1.MutatingAdmissionPolicyList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(46)), ] },
    // 51
    Message { name: "api.admissionregistration.v1beta1.MutatingAdmissionPolicySpec", special: Special::Plain, fields: &[one(1, "paramKind", Msg(54)), one(2, "matchConstraints", Msg(45)), many(3, "variables", Msg(56)), many(4, "mutations", Msg(52)), one(5, "failurePolicy", Str), many(6, "matchConditions", Msg(44)), one(7, "reinvocationPolicy", Str), ] },
    // 52
    Message { name: "api.admissionregistration.v1beta1.Mutation", special: Special::Plain, fields: &[one(2, "patchType", Str), one(3, "applyConfiguration", Msg(42)), one(4, "jsonPatch", Msg(43)), ] },
    // 53
    Message { name: "api.admissionregistration.v1beta1.NamedRuleWithOperations", special: Special::Plain, fields: &[many(1, "resourceNames", Str), one(2, "", Msg(11)), ] },
    // 54
    Message { name: "api.admissionregistration.v1beta1.ParamKind", special: Special::Plain, fields: &[one(1, "apiVersion", Str), one(2, "kind", Str), ] },
    // 55
    Message { name: "api.admissionregistration.v1beta1.ParamRef", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "namespace", Str), one(3, "selector", Msg(717)), one(4, "parameterNotFoundAction", Str), ] },
    // 56
    Message { name: "api.admissionregistration.v1beta1.Variable", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "expression", Str), ] },
    // 57
    Message { name: "api.apiserverinternal.v1alpha1.ServerStorageVersion", special: Special::Plain, fields: &[one(1, "apiServerID", Str), one(2, "encodingVersion", Str), many(3, "decodableVersions", Str), many(4, "servedVersions", Str), ] },
    // 58
    Message { name: "api.apiserverinternal.v1alpha1.StorageVersion", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(61)), one(3, "status", Msg(62)), ] },
    // 59
    Message { name: "api.apiserverinternal.v1alpha1.StorageVersionCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "observedGeneration", I64), one(4, "lastTransitionTime", Msg(728)), one(5, "reason", Str), one(6, "message", Str), ] },
    // 60
    Message { name: "api.apiserverinternal.v1alpha1.StorageVersionList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(58)), ] },
    // 61
    Message { name: "api.apiserverinternal.v1alpha1.StorageVersionSpec", special: Special::Plain, fields: &[] },
    // 62
    Message { name: "api.apiserverinternal.v1alpha1.StorageVersionStatus", special: Special::Plain, fields: &[many(1, "storageVersions", Msg(57)), one(2, "commonEncodingVersion", Str), many(3, "conditions", Msg(59)), ] },
    // 63
    Message { name: "api.apps.v1.ControllerRevision", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "data", Msg(730)), one(3, "revision", I64), ] },
    // 64
    Message { name: "api.apps.v1.ControllerRevisionList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(63)), ] },
    // 65
    Message { name: "api.apps.v1.DaemonSet", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(68)), one(3, "status", Msg(69)), ] },
    // 66
    Message { name: "api.apps.v1.DaemonSetCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 67
    Message { name: "api.apps.v1.DaemonSetList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(65)), ] },
    // 68
    Message { name: "api.apps.v1.DaemonSetSpec", special: Special::Plain, fields: &[one(1, "selector", Msg(717)), one(2, "template", Msg(346)), one(3, "updateStrategy", Msg(70)), one(4, "minReadySeconds", I32), one(6, "revisionHistoryLimit", I32), ] },
    // 69
    Message { name: "api.apps.v1.DaemonSetStatus", special: Special::Plain, fields: &[one(1, "currentNumberScheduled", I32), one(2, "numberMisscheduled", I32), one(3, "desiredNumberScheduled", I32), one(4, "numberReady", I32), one(5, "observedGeneration", I64), one(6, "updatedNumberScheduled", I32), one(7, "numberAvailable", I32), one(8, "numberUnavailable", I32), one(9, "collisionCount", I32), many(10, "conditions", Msg(66)), ] },
    // 70
    Message { name: "api.apps.v1.DaemonSetUpdateStrategy", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "rollingUpdate", Msg(82)), ] },
    // 71
    Message { name: "api.apps.v1.Deployment", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(74)), one(3, "status", Msg(75)), ] },
    // 72
    Message { name: "api.apps.v1.DeploymentCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(6, "lastUpdateTime", Msg(728)), one(7, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 73
    Message { name: "api.apps.v1.DeploymentList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(71)), ] },
    // 74
    Message { name: "api.apps.v1.DeploymentSpec", special: Special::Plain, fields: &[one(1, "replicas", I32), one(2, "selector", Msg(717)), one(3, "template", Msg(346)), one(4, "strategy", Msg(76)), one(5, "minReadySeconds", I32), one(6, "revisionHistoryLimit", I32), one(7, "paused", Bool), one(9, "progressDeadlineSeconds", I32), ] },
    // 75
    Message { name: "api.apps.v1.DeploymentStatus", special: Special::Plain, fields: &[one(1, "observedGeneration", I64), one(2, "replicas", I32), one(3, "updatedReplicas", I32), one(7, "readyReplicas", I32), one(4, "availableReplicas", I32), one(5, "unavailableReplicas", I32), one(9, "terminatingReplicas", I32), many(6, "conditions", Msg(72)), one(8, "collisionCount", I32), ] },
    // 76
    Message { name: "api.apps.v1.DeploymentStrategy", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "rollingUpdate", Msg(83)), ] },
    // 77
    Message { name: "api.apps.v1.ReplicaSet", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(80)), one(3, "status", Msg(81)), ] },
    // 78
    Message { name: "api.apps.v1.ReplicaSetCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 79
    Message { name: "api.apps.v1.ReplicaSetList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(77)), ] },
    // 80
    Message { name: "api.apps.v1.ReplicaSetSpec", special: Special::Plain, fields: &[one(1, "replicas", I32), one(4, "minReadySeconds", I32), one(2, "selector", Msg(717)), one(3, "template", Msg(346)), ] },
    // 81
    Message { name: "api.apps.v1.ReplicaSetStatus", special: Special::Plain, fields: &[one(1, "replicas", I32), one(2, "fullyLabeledReplicas", I32), one(4, "readyReplicas", I32), one(5, "availableReplicas", I32), one(7, "terminatingReplicas", I32), one(3, "observedGeneration", I64), many(6, "conditions", Msg(78)), ] },
    // 82
    Message { name: "api.apps.v1.RollingUpdateDaemonSet", special: Special::Plain, fields: &[one(1, "maxUnavailable", Msg(731)), one(2, "maxSurge", Msg(731)), ] },
    // 83
    Message { name: "api.apps.v1.RollingUpdateDeployment", special: Special::Plain, fields: &[one(1, "maxUnavailable", Msg(731)), one(2, "maxSurge", Msg(731)), ] },
    // 84
    Message { name: "api.apps.v1.RollingUpdateStatefulSetStrategy", special: Special::Plain, fields: &[one(1, "partition", I32), one(2, "maxUnavailable", Msg(731)), ] },
    // 85
    Message { name: "api.apps.v1.StatefulSet", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(90)), one(3, "status", Msg(91)), ] },
    // 86
    Message { name: "api.apps.v1.StatefulSetCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 87
    Message { name: "api.apps.v1.StatefulSetList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(85)), ] },
    // 88
    Message { name: "api.apps.v1.StatefulSetOrdinals", special: Special::Plain, fields: &[one(1, "start", I32), ] },
    // 89
    Message { name: "api.apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy", special: Special::Plain, fields: &[one(1, "whenDeleted", Str), one(2, "whenScaled", Str), ] },
    // 90
    Message { name: "api.apps.v1.StatefulSetSpec", special: Special::Plain, fields: &[one(1, "replicas", I32), one(2, "selector", Msg(717)), one(3, "template", Msg(346)), many(4, "volumeClaimTemplates", Msg(313)), one(5, "serviceName", Str), one(6, "podManagementPolicy", Str), one(7, "updateStrategy", Msg(92)), one(8, "revisionHistoryLimit", I32), one(9, "minReadySeconds", I32), one(10, "persistentVolumeClaimRetentionPolicy", Msg(89)), one(11, "ordinals", Msg(88)), ] },
    // 91
    Message { name: "api.apps.v1.StatefulSetStatus", special: Special::Plain, fields: &[one(1, "observedGeneration", I64), one(2, "replicas", I32), one(3, "readyReplicas", I32), one(4, "currentReplicas", I32), one(5, "updatedReplicas", I32), one(6, "currentRevision", Str), one(7, "updateRevision", Str), one(9, "collisionCount", I32), many(10, "conditions", Msg(86)), one(11, "availableReplicas", I32), ] },
    // 92
    Message { name: "api.apps.v1.StatefulSetUpdateStrategy", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "rollingUpdate", Msg(84)), ] },
    // 93
    Message { name: "api.authentication.v1.BoundObjectReference", special: Special::Plain, fields: &[one(1, "kind", Str), one(2, "apiVersion", Str), one(3, "name", Str), one(4, "uid", Str), ] },
    // 94
    Message { name: "api.authentication.v1.ExtraValue", special: Special::Items, fields: &[many(1, "items", Str), ] },
    // 95
    Message { name: "api.authentication.v1.SelfSubjectReview", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "status", Msg(96)), ] },
    // 96
    Message { name: "api.authentication.v1.SelfSubjectReviewStatus", special: Special::Plain, fields: &[one(1, "userInfo", Msg(103)), ] },
    // 97
    Message { name: "api.authentication.v1.TokenRequest", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(98)), one(3, "status", Msg(99)), ] },
    // 98
    Message { name: "api.authentication.v1.TokenRequestSpec", special: Special::Plain, fields: &[many(1, "audiences", Str), one(4, "expirationSeconds", I64), one(3, "boundObjectRef", Msg(93)), ] },
    // 99
    Message { name: "api.authentication.v1.TokenRequestStatus", special: Special::Plain, fields: &[one(1, "token", Str), one(2, "expirationTimestamp", Msg(728)), ] },
    // 100
    Message { name: "api.authentication.v1.TokenReview", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(101)), one(3, "status", Msg(102)), ] },
    // 101
    Message { name: "api.authentication.v1.TokenReviewSpec", special: Special::Plain, fields: &[one(1, "token", Str), many(2, "audiences", Str), ] },
    // 102
    Message { name: "api.authentication.v1.TokenReviewStatus", special: Special::Plain, fields: &[one(1, "authenticated", Bool), one(2, "user", Msg(103)), many(4, "audiences", Str), one(3, "error", Str), ] },
    // 103
    Message { name: "api.authentication.v1.UserInfo", special: Special::Plain, fields: &[one(1, "username", Str), one(2, "uid", Str), many(3, "groups", Str), one(4, "extra", MapMsg(94)), ] },
    // 104
    Message { name: "api.authorization.v1.ExtraValue", special: Special::Items, fields: &[many(1, "items", Str), ] },
    // 105
    Message { name: "api.authorization.v1.FieldSelectorAttributes", special: Special::Plain, fields: &[one(1, "rawSelector", Str), many(2, "requirements", Msg(714)), ] },
    // 106
    Message { name: "api.authorization.v1.LabelSelectorAttributes", special: Special::Plain, fields: &[one(1, "rawSelector", Str), many(2, "requirements", Msg(718)), ] },
    // 107
    Message { name: "api.authorization.v1.LocalSubjectAccessReview", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(117)), one(3, "status", Msg(118)), ] },
    // 108
    Message { name: "api.authorization.v1.NonResourceAttributes", special: Special::Plain, fields: &[one(1, "path", Str), one(2, "verb", Str), ] },
    // 109
    Message { name: "api.authorization.v1.NonResourceRule", special: Special::Plain, fields: &[many(1, "verbs", Str), many(2, "nonResourceURLs", Str), ] },
    // 110
    Message { name: "api.authorization.v1.ResourceAttributes", special: Special::Plain, fields: &[one(1, "namespace", Str), one(2, "verb", Str), one(3, "group", Str), one(4, "version", Str), one(5, "resource", Str), one(6, "subresource", Str), one(7, "name", Str), one(8, "fieldSelector", Msg(105)), one(9, "labelSelector", Msg(106)), ] },
    // 111
    Message { name: "api.authorization.v1.ResourceRule", special: Special::Plain, fields: &[many(1, "verbs", Str), many(2, "apiGroups", Str), many(3, "resources", Str), many(4, "resourceNames", Str), ] },
    // 112
    Message { name: "api.authorization.v1.SelfSubjectAccessReview", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(113)), one(3, "status", Msg(118)), ] },
    // 113
    Message { name: "api.authorization.v1.SelfSubjectAccessReviewSpec", special: Special::Plain, fields: &[one(1, "resourceAttributes", Msg(110)), one(2, "nonResourceAttributes", Msg(108)), ] },
    // 114
    Message { name: "api.authorization.v1.SelfSubjectRulesReview", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(115)), one(3, "status", Msg(119)), ] },
    // 115
    Message { name: "api.authorization.v1.SelfSubjectRulesReviewSpec", special: Special::Plain, fields: &[one(1, "namespace", Str), ] },
    // 116
    Message { name: "api.authorization.v1.SubjectAccessReview", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(117)), one(3, "status", Msg(118)), ] },
    // 117
    Message { name: "api.authorization.v1.SubjectAccessReviewSpec", special: Special::Plain, fields: &[one(1, "resourceAttributes", Msg(110)), one(2, "nonResourceAttributes", Msg(108)), one(3, "user", Str), many(4, "groups", Str), one(5, "extra", MapMsg(104)), one(6, "uid", Str), ] },
    // 118
    Message { name: "api.authorization.v1.SubjectAccessReviewStatus", special: Special::Plain, fields: &[one(1, "allowed", Bool), one(4, "denied", Bool), one(2, "reason", Str), one(3, "evaluationError", Str), ] },
    // 119
    Message { name: "api.authorization.v1.SubjectRulesReviewStatus", special: Special::Plain, fields: &[many(1, "resourceRules", Msg(111)), many(2, "nonResourceRules", Msg(109)), one(3, "incomplete", Bool), one(4, "evaluationError", Str), ] },
    // 120
    Message { name: "api.autoscaling.v1.CrossVersionObjectReference", special: Special::Plain, fields: &[one(1, "kind", Str), one(2, "name", Str), one(3, "apiVersion", Str), ] },
    // 121
    Message { name: "api.autoscaling.v1.HorizontalPodAutoscaler", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(123)), one(3, "status", Msg(124)), ] },
    // 122
    Message { name: "api.autoscaling.v1.HorizontalPodAutoscalerList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(121)), ] },
    // 123
    Message { name: "api.autoscaling.v1.HorizontalPodAutoscalerSpec", special: Special::Plain, fields: &[one(1, "scaleTargetRef", Msg(120)), one(2, "minReplicas", I32), one(3, "maxReplicas", I32), one(4, "targetCPUUtilizationPercentage", I32), ] },
    // 124
    Message { name: "api.autoscaling.v1.HorizontalPodAutoscalerStatus", special: Special::Plain, fields: &[one(1, "observedGeneration", I64), one(2, "lastScaleTime", Msg(728)), one(3, "currentReplicas", I32), one(4, "desiredReplicas", I32), one(5, "currentCPUUtilizationPercentage", I32), ] },
    // 125
    Message { name: "api.autoscaling.v1.Scale", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(126)), one(3, "status", Msg(127)), ] },
    // 126
    Message { name: "api.autoscaling.v1.ScaleSpec", special: Special::Plain, fields: &[one(1, "replicas", I32), ] },
    // 127
    Message { name: "api.autoscaling.v1.ScaleStatus", special: Special::Plain, fields: &[one(1, "replicas", I32), one(2, "selector", Str), ] },
    // 128
    Message { name: "api.autoscaling.v2.ContainerResourceMetricSource", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "target", Msg(144)), one(3, "container", Str), ] },
    // 129
    Message { name: "api.autoscaling.v2.ContainerResourceMetricStatus", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "current", Msg(145)), one(3, "container", Str), ] },
    // 130
    Message { name: "api.autoscaling.v2.CrossVersionObjectReference", special: Special::Plain, fields: &[one(1, "kind", Str), one(2, "name", Str), one(3, "apiVersion", Str), ] },
    // 131
    Message { name: "api.autoscaling.v2.ExternalMetricSource", special: Special::Plain, fields: &[one(1, "metric", Msg(141)), one(2, "target", Msg(144)), ] },
    // 132
    Message { name: "api.autoscaling.v2.ExternalMetricStatus", special: Special::Plain, fields: &[one(1, "metric", Msg(141)), one(2, "current", Msg(145)), ] },
    // 133
    Message { name: "api.autoscaling.v2.HorizontalPodAutoscaler", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(137)), one(3, "status", Msg(138)), ] },
    // 134
    Message { name: "api.autoscaling.v2.HorizontalPodAutoscalerBehavior", special: Special::Plain, fields: &[one(1, "scaleUp", Msg(140)), one(2, "scaleDown", Msg(140)), ] },
    // 135
    Message { name: "api.autoscaling.v2.HorizontalPodAutoscalerCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 136
    Message { name: "api.autoscaling.v2.HorizontalPodAutoscalerList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(133)), ] },
    // 137
    Message { name: "api.autoscaling.v2.HorizontalPodAutoscalerSpec", special: Special::Plain, fields: &[one(1, "scaleTargetRef", Msg(130)), one(2, "minReplicas", I32), one(3, "maxReplicas", I32), many(4, "metrics", Msg(142)), one(5, "behavior", Msg(134)), ] },
    // 138
    Message { name: "api.autoscaling.v2.HorizontalPodAutoscalerStatus", special: Special::Plain, fields: &[one(1, "observedGeneration", I64), one(2, "lastScaleTime", Msg(728)), one(3, "currentReplicas", I32), one(4, "desiredReplicas", I32), many(5, "currentMetrics", Msg(143)), many(6, "conditions", Msg(135)), ] },
    // 139
    Message { name: "api.autoscaling.v2.HpaScalingPolicy", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "value", I32), one(3, "periodSeconds", I32), ] },
    // 140
    Message { name: "api.autoscaling.v2.HpaScalingRules", special: Special::Plain, fields: &[one(3, "stabilizationWindowSeconds", I32), one(1, "selectPolicy", Str), many(2, "policies", Msg(139)), one(4, "tolerance", Msg(711)), ] },
    // 141
    Message { name: "api.autoscaling.v2.MetricIdentifier", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "selector", Msg(717)), ] },
    // 142
    Message { name: "api.autoscaling.v2.MetricSpec", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "object", Msg(146)), one(3, "pods", Msg(148)), one(4, "resource", Msg(150)), one(7, "containerResource", Msg(128)), one(5, "external", Msg(131)), ] },
    // 143
    Message { name: "api.autoscaling.v2.MetricStatus", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "object", Msg(147)), one(3, "pods", Msg(149)), one(4, "resource", Msg(151)), one(7, "containerResource", Msg(129)), one(5, "external", Msg(132)), ] },
    // 144
    Message { name: "api.autoscaling.v2.MetricTarget", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "value", Msg(711)), one(3, "averageValue", Msg(711)), one(4, "averageUtilization", I32), ] },
    // 145
    Message { name: "api.autoscaling.v2.MetricValueStatus", special: Special::Plain, fields: &[one(1, "value", Msg(711)), one(2, "averageValue", Msg(711)), one(3, "averageUtilization", I32), ] },
    // 146
    Message { name: "api.autoscaling.v2.ObjectMetricSource", special: Special::Plain, fields: &[one(1, "describedObject", Msg(130)), one(2, "target", Msg(144)), one(3, "metric", Msg(141)), ] },
    // 147
    Message { name: "api.autoscaling.v2.ObjectMetricStatus", special: Special::Plain, fields: &[one(1, "metric", Msg(141)), one(2, "current", Msg(145)), one(3, "describedObject", Msg(130)), ] },
    // 148
    Message { name: "api.autoscaling.v2.PodsMetricSource", special: Special::Plain, fields: &[one(1, "metric", Msg(141)), one(2, "target", Msg(144)), ] },
    // 149
    Message { name: "api.autoscaling.v2.PodsMetricStatus", special: Special::Plain, fields: &[one(1, "metric", Msg(141)), one(2, "current", Msg(145)), ] },
    // 150
    Message { name: "api.autoscaling.v2.ResourceMetricSource", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "target", Msg(144)), ] },
    // 151
    Message { name: "api.autoscaling.v2.ResourceMetricStatus", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "current", Msg(145)), ] },
    // 152
    Message { name: "api.batch.v1.CronJob", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(154)), one(3, "status", Msg(155)), ] },
    // 153
    Message { name: "api.batch.v1.CronJobList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(152)), ] },
    // 154
    Message { name: "api.batch.v1.CronJobSpec", special: Special::Plain, fields: &[one(1, "schedule", Str), one(8, "timeZone", Str), one(2, "startingDeadlineSeconds", I64), one(3, "concurrencyPolicy", Str), one(4, "suspend", Bool), one(5, "jobTemplate", Msg(161)), one(6, "successfulJobsHistoryLimit", I32), one(7, "failedJobsHistoryLimit", I32), ] },
    // 155
    Message { name: "api.batch.v1.CronJobStatus", special: Special::Plain, fields: &[many(1, "active", Msg(311)), one(4, "lastScheduleTime", Msg(728)), one(5, "lastSuccessfulTime", Msg(728)), ] },
    // 156
    Message { name: "api.batch.v1.Job", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(159)), one(3, "status", Msg(160)), ] },
    // 157
    Message { name: "api.batch.v1.JobCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastProbeTime", Msg(728)), one(4, "lastTransitionTime", Msg(728)), one(5, "reason", Str), one(6, "message", Str), ] },
    // 158
    Message { name: "api.batch.v1.JobList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(156)), ] },
    // 159
    Message { name: "api.batch.v1.JobSpec", special: Special::Plain, fields: &[one(1, "parallelism", I32), one(2, "completions", I32), one(3, "activeDeadlineSeconds", I64), one(11, "podFailurePolicy", Msg(162)), one(16, "successPolicy", Msg(166)), one(7, "backoffLimit", I32), one(12, "backoffLimitPerIndex", I32), one(13, "maxFailedIndexes", I32), one(4, "selector", Msg(717)), one(5, "manualSelector", Bool), one(6, "template", Msg(346)), one(8, "ttlSecondsAfterFinished", I32), one(9, "completionMode", Str), one(10, "suspend", Bool), one(14, "podReplacementPolicy", Str), one(15, "managedBy", Str), ] },
    // 160
    Message { name: "api.batch.v1.JobStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(157)), one(2, "startTime", Msg(728)), one(3, "completionTime", Msg(728)), one(4, "active", I32), one(5, "succeeded", I32), one(6, "failed", I32), one(11, "terminating", I32), one(7, "completedIndexes", Str), one(10, "failedIndexes", Str), one(8, "uncountedTerminatedPods", Msg(168)), one(9, "ready", I32), ] },
    // 161
    Message { name: "api.batch.v1.JobTemplateSpec", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(159)), ] },
    // 162
    Message { name: "api.batch.v1.PodFailurePolicy", special: Special::Plain, fields: &[many(1, "rules", Msg(165)), ] },
    // 163
    Message { name: "api.batch.v1.PodFailurePolicyOnExitCodesRequirement", special: Special::Plain, fields: &[one(1, "containerName", Str), one(2, "operator", Str), many(3, "values", I32), ] },
    // 164
    Message { name: "api.batch.v1.PodFailurePolicyOnPodConditionsPattern", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), ] },
    // 165
    Message { name: "api.batch.v1.PodFailurePolicyRule", special: Special::Plain, fields: &[one(1, "action", Str), one(2, "onExitCodes", Msg(163)), many(3, "onPodConditions", Msg(164)), ] },
    // 166
    Message { name: "api.batch.v1.SuccessPolicy", special: Special::Plain, fields: &[many(1, "rules", Msg(167)), ] },
    // 167
    Message { name: "api.batch.v1.SuccessPolicyRule", special: Special::Plain, fields: &[one(1, "succeededIndexes", Str), one(2, "succeededCount", I32), ] },
    // 168
    Message { name: "api.batch.v1.UncountedTerminatedPods", special: Special::Plain, fields: &[many(1, "succeeded", Str), many(2, "failed", Str), ] },
    // 169
    Message { name: "api.certificates.v1.CertificateSigningRequest", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(172)), one(3, "status", Msg(173)), ] },
    // 170
    Message { name: "api.certificates.v1.CertificateSigningRequestCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(6, "status", Str), one(2, "reason", Str), one(3, "message", Str), one(4, "lastUpdateTime", Msg(728)), one(5, "lastTransitionTime", Msg(728)), ] },
    // 171
    Message { name: "api.certificates.v1.CertificateSigningRequestList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(169)), ] },
    // 172
    Message { name: "api.certificates.v1.CertificateSigningRequestSpec", special: Special::Plain, fields: &[one(1, "request", Bytes), one(7, "signerName", Str), one(8, "expirationSeconds", I32), many(5, "usages", Str), one(2, "username", Str), one(3, "uid", Str), many(4, "groups", Str), one(6, "extra", MapMsg(174)), ] },
    // 173
    Message { name: "api.certificates.v1.CertificateSigningRequestStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(170)), one(2, "certificate", Bytes), ] },
    // 174
    Message { name: "api.certificates.v1.ExtraValue", special: Special::Items, fields: &[many(1, "items", Str), ] },
    // 175
    Message { name: "api.certificates.v1alpha1.ClusterTrustBundle", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(177)), ] },
    // 176
    Message { name: "api.certificates.v1alpha1.ClusterTrustBundleList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(175)), ] },
    // 177
    Message { name: "api.certificates.v1alpha1.ClusterTrustBundleSpec", special: Special::Plain, fields: &[one(1, "signerName", Str), one(2, "trustBundle", Str), ] },
    // 178
    Message { name: "api.certificates.v1beta1.ClusterTrustBundle", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(180)), ] },
    // 179
    Message { name: "api.certificates.v1beta1.ClusterTrustBundleList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(178)), ] },
    // 180
    Message { name: "api.certificates.v1beta1.ClusterTrustBundleSpec", special: Special::Plain, fields: &[one(1, "signerName", Str), one(2, "trustBundle", Str), ] },
    // 181
    Message { name: "api.certificates.v1beta1.PodCertificateRequest", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(183)), one(3, "status", Msg(184)), ] },
    // 182
    Message { name: "api.certificates.v1beta1.PodCertificateRequestList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(181)), ] },
    // 183
    Message { name: "api.certificates.v1beta1.PodCertificateRequestSpec", special: Special::Plain, fields: &[one(1, "signerName", Str), one(2, "podName", Str), one(3, "podUID", Str), one(4, "serviceAccountName", Str), one(5, "serviceAccountUID", Str), one(6, "nodeName", Str), one(7, "nodeUID", Str), one(8, "maxExpirationSeconds", I32), one(9, "pkixPublicKey", Bytes), one(10, "proofOfPossession", Bytes), one(11, "unverifiedUserAnnotations", MapStr), ] },
    // 184
    Message { name: "api.certificates.v1beta1.PodCertificateRequestStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(712)), one(2, "certificateChain", Str), one(4, "notBefore", Msg(728)), one(5, "beginRefreshAt", Msg(728)), one(6, "notAfter", Msg(728)), ] },
    // 185
    Message { name: "api.coordination.v1.Lease", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(187)), ] },
    // 186
    Message { name: "api.coordination.v1.LeaseList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(185)), ] },
    // 187
    Message { name: "api.coordination.v1.LeaseSpec", special: Special::Plain, fields: &[one(1, "holderIdentity", Str), one(2, "leaseDurationSeconds", I32), one(3, "acquireTime", Msg(721)), one(4, "renewTime", Msg(721)), one(5, "leaseTransitions", I32), one(6, "strategy", Str), one(7, "preferredHolder", Str), ] },
    // 188
    Message { name: "api.coordination.v1alpha2.LeaseCandidate", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(190)), ] },
    // 189
    Message { name: "api.coordination.v1alpha2.LeaseCandidateList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(188)), ] },
    // 190
    Message { name: "api.coordination.v1alpha2.LeaseCandidateSpec", special: Special::Plain, fields: &[one(1, "leaseName", Str), one(2, "pingTime", Msg(721)), one(3, "renewTime", Msg(721)), one(4, "binaryVersion", Str), one(5, "emulationVersion", Str), one(6, "strategy", Str), ] },
    // 191
    Message { name: "api.coordination.v1beta1.LeaseCandidate", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(193)), ] },
    // 192
    Message { name: "api.coordination.v1beta1.LeaseCandidateList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(191)), ] },
    // 193
    Message { name: "api.coordination.v1beta1.LeaseCandidateSpec", special: Special::Plain, fields: &[one(1, "leaseName", Str), one(2, "pingTime", Msg(721)), one(3, "renewTime", Msg(721)), one(4, "binaryVersion", Str), one(5, "emulationVersion", Str), one(6, "strategy", Str), ] },
    // 194
    Message { name: "api.core.v1.Affinity", special: Special::Plain, fields: &[one(1, "nodeAffinity", Msg(294)), one(2, "podAffinity", Msg(326)), one(3, "podAntiAffinity", Msg(328)), ] },
    // 195
    Message { name: "api.core.v1.AppArmorProfile", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "localhostProfile", Str), ] },
    // 196
    Message { name: "api.core.v1.AttachedVolume", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "devicePath", Str), ] },
    // 197
    Message { name: "api.core.v1.AwsElasticBlockStoreVolumeSource", special: Special::Plain, fields: &[one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "partition", I32), one(4, "readOnly", Bool), ] },
    // 198
    Message { name: "api.core.v1.AzureDiskVolumeSource", special: Special::Plain, fields: &[one(1, "diskName", Str), one(2, "diskURI", Str), one(3, "cachingMode", Str), one(4, "fsType", Str), one(5, "readOnly", Bool), one(6, "kind", Str), ] },
    // 199
    Message { name: "api.core.v1.AzureFilePersistentVolumeSource", special: Special::Plain, fields: &[one(1, "secretName", Str), one(2, "shareName", Str), one(3, "readOnly", Bool), one(4, "secretNamespace", Str), ] },
    // 200
    Message { name: "api.core.v1.AzureFileVolumeSource", special: Special::Plain, fields: &[one(1, "secretName", Str), one(2, "shareName", Str), one(3, "readOnly", Bool), ] },
    // 201
    Message { name: "api.core.v1.Binding", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "target", Msg(311)), ] },
    // 202
    Message { name: "api.core.v1.CSIPersistentVolumeSource", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "volumeHandle", Str), one(3, "readOnly", Bool), one(4, "fsType", Str), one(5, "volumeAttributes", MapStr), one(6, "controllerPublishSecretRef", Msg(381)), one(7, "nodeStageSecretRef", Msg(381)), one(8, "nodePublishSecretRef", Msg(381)), one(9, "controllerExpandSecretRef", Msg(381)), one(10, "nodeExpandSecretRef", Msg(381)), ] },
    // 203
    Message { name: "api.core.v1.CSIVolumeSource", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "readOnly", Bool), one(3, "fsType", Str), one(4, "volumeAttributes", MapStr), one(5, "nodePublishSecretRef", Msg(283)), ] },
    // 204
    Message { name: "api.core.v1.Capabilities", special: Special::Plain, fields: &[many(1, "add", Str), many(2, "drop", Str), ] },
    // 205
    Message { name: "api.core.v1.CephFsPersistentVolumeSource", special: Special::Plain, fields: &[many(1, "monitors", Str), one(2, "path", Str), one(3, "user", Str), one(4, "secretFile", Str), one(5, "secretRef", Msg(381)), one(6, "readOnly", Bool), ] },
    // 206
    Message { name: "api.core.v1.CephFsVolumeSource", special: Special::Plain, fields: &[many(1, "monitors", Str), one(2, "path", Str), one(3, "user", Str), one(4, "secretFile", Str), one(5, "secretRef", Msg(283)), one(6, "readOnly", Bool), ] },
    // 207
    Message { name: "api.core.v1.CinderPersistentVolumeSource", special: Special::Plain, fields: &[one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "readOnly", Bool), one(4, "secretRef", Msg(381)), ] },
    // 208
    Message { name: "api.core.v1.CinderVolumeSource", special: Special::Plain, fields: &[one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "readOnly", Bool), one(4, "secretRef", Msg(283)), ] },
    // 209
    Message { name: "api.core.v1.ClientIpConfig", special: Special::Plain, fields: &[one(1, "timeoutSeconds", I32), ] },
    // 210
    Message { name: "api.core.v1.ClusterTrustBundleProjection", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "signerName", Str), one(3, "labelSelector", Msg(717)), one(5, "optional", Bool), one(4, "path", Str), ] },
    // 211
    Message { name: "api.core.v1.ComponentCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "message", Str), one(4, "error", Str), ] },
    // 212
    Message { name: "api.core.v1.ComponentStatus", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "conditions", Msg(211)), ] },
    // 213
    Message { name: "api.core.v1.ComponentStatusList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(212)), ] },
    // 214
    Message { name: "api.core.v1.ConfigMap", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(4, "immutable", Bool), one(2, "data", MapStr), one(3, "binaryData", MapBytes), ] },
    // 215
    Message { name: "api.core.v1.ConfigMapEnvSource", special: Special::Plain, fields: &[one(1, "", Msg(283)), one(2, "optional", Bool), ] },
    // 216
    Message { name: "api.core.v1.ConfigMapKeySelector", special: Special::Plain, fields: &[one(1, "", Msg(283)), one(2, "key", Str), one(3, "optional", Bool), ] },
    // 217
    Message { name: "api.core.v1.ConfigMapList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(214)), ] },
    // 218
    Message { name: "api.core.v1.ConfigMapNodeConfigSource", special: Special::Plain, fields: &[one(1, "namespace", Str), one(2, "name", Str), one(3, "uid", Str), one(4, "resourceVersion", Str), one(5, "kubeletConfigKey", Str), ] },
    // 219
    Message { name: "api.core.v1.ConfigMapProjection", special: Special::Plain, fields: &[one(1, "", Msg(283)), many(2, "items", Msg(273)), one(4, "optional", Bool), ] },
    // 220
    Message { name: "api.core.v1.ConfigMapVolumeSource", special: Special::Plain, fields: &[one(1, "", Msg(283)), many(2, "items", Msg(273)), one(3, "defaultMode", I32), one(4, "optional", Bool), ] },
    // 221
    Message { name: "api.core.v1.Container", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "image", Str), many(3, "command", Str), many(4, "args", Str), one(5, "workingDir", Str), many(6, "ports", Msg(224)), many(19, "envFrom", Msg(244)), many(7, "env", Msg(245)), one(8, "resources", Msg(368)), many(23, "resizePolicy", Msg(225)), one(24, "restartPolicy", Str), many(25, "restartPolicyRules", Msg(226)), many(9, "volumeMounts", Msg(407)), many(21, "volumeDevices", Msg(406)), one(10, "livenessProbe", Msg(350)), one(11, "readinessProbe", Msg(350)), one(22, "startupProbe", Msg(350)), one(12, "lifecycle", Msg(274)), one(13, "terminationMessagePath", Str), one(20, "terminationMessagePolicy", Str), one(14, "imagePullPolicy", Str), one(15, "securityContext", Msg(383)), one(16, "stdin", Bool), one(17, "stdinOnce", Bool), one(18, "tty", Bool), ] },
    // 222
    Message { name: "api.core.v1.ContainerExtendedResourceRequest", special: Special::Plain, fields: &[one(1, "containerName", Str), one(2, "resourceName", Str), one(3, "requestName", Str), ] },
    // 223
    Message { name: "api.core.v1.ContainerImage", special: Special::Plain, fields: &[many(1, "names", Str), one(2, "sizeBytes", I64), ] },
    // 224
    Message { name: "api.core.v1.ContainerPort", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "hostPort", I32), one(3, "containerPort", I32), one(4, "protocol", Str), one(5, "hostIP", Str), ] },
    // 225
    Message { name: "api.core.v1.ContainerResizePolicy", special: Special::Plain, fields: &[one(1, "resourceName", Str), one(2, "restartPolicy", Str), ] },
    // 226
    Message { name: "api.core.v1.ContainerRestartRule", special: Special::Plain, fields: &[one(1, "action", Str), one(2, "exitCodes", Msg(227)), ] },
    // 227
    Message { name: "api.core.v1.ContainerRestartRuleOnExitCodes", special: Special::Plain, fields: &[one(1, "operator", Str), many(2, "values", I32), ] },
    // 228
    Message { name: "api.core.v1.ContainerState", special: Special::Plain, fields: &[one(1, "waiting", Msg(231)), one(2, "running", Msg(229)), one(3, "terminated", Msg(230)), ] },
    // 229
    Message { name: "api.core.v1.ContainerStateRunning", special: Special::Plain, fields: &[one(1, "startedAt", Msg(728)), ] },
    // 230
    Message { name: "api.core.v1.ContainerStateTerminated", special: Special::Plain, fields: &[one(1, "exitCode", I32), one(2, "signal", I32), one(3, "reason", Str), one(4, "message", Str), one(5, "startedAt", Msg(728)), one(6, "finishedAt", Msg(728)), one(7, "containerID", Str), ] },
    // 231
    Message { name: "api.core.v1.ContainerStateWaiting", special: Special::Plain, fields: &[one(1, "reason", Str), one(2, "message", Str), ] },
    // 232
    Message { name: "api.core.v1.ContainerStatus", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "state", Msg(228)), one(3, "lastState", Msg(228)), one(4, "ready", Bool), one(5, "restartCount", I32), one(6, "image", Str), one(7, "imageID", Str), one(8, "containerID", Str), one(9, "started", Bool), one(10, "allocatedResources", MapMsg(711)), one(11, "resources", Msg(368)), many(12, "volumeMounts", Msg(408)), one(13, "user", Msg(233)), many(14, "allocatedResourcesStatus", Msg(369)), one(15, "stopSignal", Str), ] },
    // 233
    Message { name: "api.core.v1.ContainerUser", special: Special::Plain, fields: &[one(1, "linux", Msg(280)), ] },
    // 234
    Message { name: "api.core.v1.DaemonEndpoint", special: Special::Plain, fields: &[one(1, "Port", I32), ] },
    // 235
    Message { name: "api.core.v1.DownwardAPIProjection", special: Special::Plain, fields: &[many(1, "items", Msg(236)), ] },
    // 236
    Message { name: "api.core.v1.DownwardAPIVolumeFile", special: Special::Plain, fields: &[one(1, "path", Str), one(2, "fieldRef", Msg(310)), one(3, "resourceFieldRef", Msg(362)), one(4, "mode", I32), ] },
    // 237
    Message { name: "api.core.v1.DownwardAPIVolumeSource", special: Special::Plain, fields: &[many(1, "items", Msg(236)), one(2, "defaultMode", I32), ] },
    // 238
    Message { name: "api.core.v1.EmptyDirVolumeSource", special: Special::Plain, fields: &[one(1, "medium", Str), one(2, "sizeLimit", Msg(711)), ] },
    // 239
    Message { name: "api.core.v1.EndpointAddress", special: Special::Plain, fields: &[one(1, "ip", Str), one(3, "hostname", Str), one(4, "nodeName", Str), one(2, "targetRef", Msg(311)), ] },
    // 240
    Message { name: "api.core.v1.EndpointPort", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "port", I32), one(3, "protocol", Str), one(4, "appProtocol", Str), ] },
    // 241
    Message { name: "api.core.v1.EndpointSubset", special: Special::Plain, fields: &[many(1, "addresses", Msg(239)), many(2, "notReadyAddresses", Msg(239)), many(3, "ports", Msg(240)), ] },
    // 242
    Message { name: "api.core.v1.Endpoints", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "subsets", Msg(241)), ] },
    // 243
    Message { name: "api.core.v1.EndpointsList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(242)), ] },
    // 244
    Message { name: "api.core.v1.EnvFromSource", special: Special::Plain, fields: &[one(1, "prefix", Str), one(2, "configMapRef", Msg(215)), one(3, "secretRef", Msg(377)), ] },
    // 245
    Message { name: "api.core.v1.EnvVar", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "value", Str), one(3, "valueFrom", Msg(246)), ] },
    // 246
    Message { name: "api.core.v1.EnvVarSource", special: Special::Plain, fields: &[one(1, "fieldRef", Msg(310)), one(2, "resourceFieldRef", Msg(362)), one(3, "configMapKeyRef", Msg(216)), one(4, "secretKeyRef", Msg(378)), one(5, "fileKeyRef", Msg(256)), ] },
    // 247
    Message { name: "api.core.v1.EphemeralContainer", special: Special::Plain, fields: &[one(1, "", Msg(248)), one(2, "targetContainerName", Str), ] },
    // 248
    Message { name: "api.core.v1.EphemeralContainerCommon", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "image", Str), many(3, "command", Str), many(4, "args", Str), one(5, "workingDir", Str), many(6, "ports", Msg(224)), many(19, "envFrom", Msg(244)), many(7, "env", Msg(245)), one(8, "resources", Msg(368)), many(23, "resizePolicy", Msg(225)), one(24, "restartPolicy", Str), many(25, "restartPolicyRules", Msg(226)), many(9, "volumeMounts", Msg(407)), many(21, "volumeDevices", Msg(406)), one(10, "livenessProbe", Msg(350)), one(11, "readinessProbe", Msg(350)), one(22, "startupProbe", Msg(350)), one(12, "lifecycle", Msg(274)), one(13, "terminationMessagePath", Str), one(20, "terminationMessagePolicy", Str), one(14, "imagePullPolicy", Str), one(15, "securityContext", Msg(383)), one(16, "stdin", Bool), one(17, "stdinOnce", Bool), one(18, "tty", Bool), ] },
    // 249
    Message { name: "api.core.v1.EphemeralVolumeSource", special: Special::Plain, fields: &[one(1, "volumeClaimTemplate", Msg(318)), ] },
    // 250
    Message { name: "api.core.v1.Event", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "involvedObject", Msg(311)), one(3, "reason", Str), one(4, "message", Str), one(5, "source", Msg(253)), one(6, "firstTimestamp", Msg(728)), one(7, "lastTimestamp", Msg(728)), one(8, "count", I32), one(9, "type", Str), one(10, "eventTime", Msg(721)), one(11, "series", Msg(252)), one(12, "action", Str), one(13, "related", Msg(311)), one(14, "reportingComponent", Str), one(15, "reportingInstance", Str), ] },
    // 251
    Message { name: "api.core.v1.EventList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(250)), ] },
    // 252
    Message { name: "api.core.v1.EventSeries", special: Special::Plain, fields: &[one(1, "count", I32), one(2, "lastObservedTime", Msg(721)), ] },
    // 253
    Message { name: "api.core.v1.EventSource", special: Special::Plain, fields: &[one(1, "component", Str), one(2, "host", Str), ] },
    // 254
    Message { name: "api.core.v1.ExecAction", special: Special::Plain, fields: &[many(1, "command", Str), ] },
    // 255
    Message { name: "api.core.v1.FcVolumeSource", special: Special::Plain, fields: &[many(1, "targetWWNs", Str), one(2, "lun", I32), one(3, "fsType", Str), one(4, "readOnly", Bool), many(5, "wwids", Str), ] },
    // 256
    Message { name: "api.core.v1.FileKeySelector", special: Special::Plain, fields: &[one(1, "volumeName", Str), one(2, "path", Str), one(3, "key", Str), one(4, "optional", Bool), ] },
    // 257
    Message { name: "api.core.v1.FlexPersistentVolumeSource", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "fsType", Str), one(3, "secretRef", Msg(381)), one(4, "readOnly", Bool), one(5, "options", MapStr), ] },
    // 258
    Message { name: "api.core.v1.FlexVolumeSource", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "fsType", Str), one(3, "secretRef", Msg(283)), one(4, "readOnly", Bool), one(5, "options", MapStr), ] },
    // 259
    Message { name: "api.core.v1.FlockerVolumeSource", special: Special::Plain, fields: &[one(1, "datasetName", Str), one(2, "datasetUUID", Str), ] },
    // 260
    Message { name: "api.core.v1.GcePersistentDiskVolumeSource", special: Special::Plain, fields: &[one(1, "pdName", Str), one(2, "fsType", Str), one(3, "partition", I32), one(4, "readOnly", Bool), ] },
    // 261
    Message { name: "api.core.v1.GitRepoVolumeSource", special: Special::Plain, fields: &[one(1, "repository", Str), one(2, "revision", Str), one(3, "directory", Str), ] },
    // 262
    Message { name: "api.core.v1.GlusterfsPersistentVolumeSource", special: Special::Plain, fields: &[one(1, "endpoints", Str), one(2, "path", Str), one(3, "readOnly", Bool), one(4, "endpointsNamespace", Str), ] },
    // 263
    Message { name: "api.core.v1.GlusterfsVolumeSource", special: Special::Plain, fields: &[one(1, "endpoints", Str), one(2, "path", Str), one(3, "readOnly", Bool), ] },
    // 264
    Message { name: "api.core.v1.GrpcAction", special: Special::Plain, fields: &[one(1, "port", I32), one(2, "service", Str), ] },
    // 265
    Message { name: "api.core.v1.HostAlias", special: Special::Plain, fields: &[one(1, "ip", Str), many(2, "hostnames", Str), ] },
    // 266
    Message { name: "api.core.v1.HostIp", special: Special::Plain, fields: &[one(1, "ip", Str), ] },
    // 267
    Message { name: "api.core.v1.HostPathVolumeSource", special: Special::Plain, fields: &[one(1, "path", Str), one(2, "type", Str), ] },
    // 268
    Message { name: "api.core.v1.HttpGetAction", special: Special::Plain, fields: &[one(1, "path", Str), one(2, "port", Msg(731)), one(3, "host", Str), one(4, "scheme", Str), many(5, "httpHeaders", Msg(269)), ] },
    // 269
    Message { name: "api.core.v1.HttpHeader", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "value", Str), ] },
    // 270
    Message { name: "api.core.v1.ImageVolumeSource", special: Special::Plain, fields: &[one(1, "reference", Str), one(2, "pullPolicy", Str), ] },
    // 271
    Message { name: "api.core.v1.IscsiPersistentVolumeSource", special: Special::Plain, fields: &[one(1, "targetPortal", Str), one(2, "iqn", Str), one(3, "lun", I32), one(4, "iscsiInterface", Str), one(5, "fsType", Str), one(6, "readOnly", Bool), many(7, "portals", Str), one(8, "chapAuthDiscovery", Bool), one(11, "chapAuthSession", Bool), one(10, "secretRef", Msg(381)), one(12, "initiatorName", Str), ] },
    // 272
    Message { name: "api.core.v1.IscsiVolumeSource", special: Special::Plain, fields: &[one(1, "targetPortal", Str), one(2, "iqn", Str), one(3, "lun", I32), one(4, "iscsiInterface", Str), one(5, "fsType", Str), one(6, "readOnly", Bool), many(7, "portals", Str), one(8, "chapAuthDiscovery", Bool), one(11, "chapAuthSession", Bool), one(10, "secretRef", Msg(283)), one(12, "initiatorName", Str), ] },
    // 273
    Message { name: "api.core.v1.KeyToPath", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "path", Str), one(3, "mode", I32), ] },
    // 274
    Message { name: "api.core.v1.Lifecycle", special: Special::Plain, fields: &[one(1, "postStart", Msg(275)), one(2, "preStop", Msg(275)), one(3, "stopSignal", Str), ] },
    // 275
    Message { name: "api.core.v1.LifecycleHandler", special: Special::Plain, fields: &[one(1, "exec", Msg(254)), one(2, "httpGet", Msg(268)), one(3, "tcpSocket", Msg(398)), one(4, "sleep", Msg(393)), ] },
    // 276
    Message { name: "api.core.v1.LimitRange", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(279)), ] },
    // 277
    Message { name: "api.core.v1.LimitRangeItem", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "max", MapMsg(711)), one(3, "min", MapMsg(711)), one(4, "default", MapMsg(711)), one(5, "defaultRequest", MapMsg(711)), one(6, "maxLimitRequestRatio", MapMsg(711)), ] },
    // 278
    Message { name: "api.core.v1.LimitRangeList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(276)), ] },
    // 279
    Message { name: "api.core.v1.LimitRangeSpec", special: Special::Plain, fields: &[many(1, "limits", Msg(277)), ] },
    // 280
    Message { name: "api.core.v1.LinuxContainerUser", special: Special::Plain, fields: &[one(1, "uid", I64), one(2, "gid", I64), many(3, "supplementalGroups", I64), ] },
    // 281
    Message { name: "api.core.v1.LoadBalancerIngress", special: Special::Plain, fields: &[one(1, "ip", Str), one(2, "hostname", Str), one(3, "ipMode", Str), many(4, "ports", Msg(347)), ] },
    // 282
    Message { name: "api.core.v1.LoadBalancerStatus", special: Special::Plain, fields: &[many(1, "ingress", Msg(281)), ] },
    // 283
    Message { name: "api.core.v1.LocalObjectReference", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 284
    Message { name: "api.core.v1.LocalVolumeSource", special: Special::Plain, fields: &[one(1, "path", Str), one(2, "fsType", Str), ] },
    // 285
    Message { name: "api.core.v1.ModifyVolumeStatus", special: Special::Plain, fields: &[one(1, "targetVolumeAttributesClassName", Str), one(2, "status", Str), ] },
    // 286
    Message { name: "api.core.v1.Namespace", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(289)), one(3, "status", Msg(290)), ] },
    // 287
    Message { name: "api.core.v1.NamespaceCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(4, "lastTransitionTime", Msg(728)), one(5, "reason", Str), one(6, "message", Str), ] },
    // 288
    Message { name: "api.core.v1.NamespaceList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(286)), ] },
    // 289
    Message { name: "api.core.v1.NamespaceSpec", special: Special::Plain, fields: &[many(1, "finalizers", Str), ] },
    // 290
    Message { name: "api.core.v1.NamespaceStatus", special: Special::Plain, fields: &[one(1, "phase", Str), many(2, "conditions", Msg(287)), ] },
    // 291
    Message { name: "api.core.v1.NfsVolumeSource", special: Special::Plain, fields: &[one(1, "server", Str), one(2, "path", Str), one(3, "readOnly", Bool), ] },
    // 292
    Message { name: "api.core.v1.Node", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(306)), one(3, "status", Msg(307)), ] },
    // 293
    Message { name: "api.core.v1.NodeAddress", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "address", Str), ] },
    // 294
    Message { name: "api.core.v1.NodeAffinity", special: Special::Plain, fields: &[one(1, "requiredDuringSchedulingIgnoredDuringExecution", Msg(303)), many(2, "preferredDuringSchedulingIgnoredDuringExecution", Msg(349)), ] },
    // 295
    Message { name: "api.core.v1.NodeCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastHeartbeatTime", Msg(728)), one(4, "lastTransitionTime", Msg(728)), one(5, "reason", Str), one(6, "message", Str), ] },
    // 296
    Message { name: "api.core.v1.NodeConfigSource", special: Special::Plain, fields: &[one(2, "configMap", Msg(218)), ] },
    // 297
    Message { name: "api.core.v1.NodeConfigStatus", special: Special::Plain, fields: &[one(1, "assigned", Msg(296)), one(2, "active", Msg(296)), one(3, "lastKnownGood", Msg(296)), one(4, "error", Str), ] },
    // 298
    Message { name: "api.core.v1.NodeDaemonEndpoints", special: Special::Plain, fields: &[one(1, "kubeletEndpoint", Msg(234)), ] },
    // 299
    Message { name: "api.core.v1.NodeFeatures", special: Special::Plain, fields: &[one(1, "supplementalGroupsPolicy", Bool), ] },
    // 300
    Message { name: "api.core.v1.NodeList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(292)), ] },
    // 301
    Message { name: "api.core.v1.NodeRuntimeHandler", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "features", Msg(302)), ] },
    // 302
    Message { name: "api.core.v1.NodeRuntimeHandlerFeatures", special: Special::Plain, fields: &[one(1, "recursiveReadOnlyMounts", Bool), one(2, "userNamespaces", Bool), ] },
    // 303
    Message { name: "api.core.v1.NodeSelector", special: Special::Plain, fields: &[many(1, "nodeSelectorTerms", Msg(305)), ] },
    // 304
    Message { name: "api.core.v1.NodeSelectorRequirement", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "operator", Str), many(3, "values", Str), ] },
    // 305
    Message { name: "api.core.v1.NodeSelectorTerm", special: Special::Plain, fields: &[many(1, "matchExpressions", Msg(304)), many(2, "matchFields", Msg(304)), ] },
    // 306
    Message { name: "api.core.v1.NodeSpec", special: Special::Plain, fields: &[one(1, "podCIDR", Str), many(7, "podCIDRs", Str), one(3, "providerID", Str), one(4, "unschedulable", Bool), many(5, "taints", Msg(397)), one(6, "configSource", Msg(296)), one(2, "externalID", Str), ] },
    // 307
    Message { name: "api.core.v1.NodeStatus", special: Special::Plain, fields: &[one(1, "capacity", MapMsg(711)), one(2, "allocatable", MapMsg(711)), one(3, "phase", Str), many(4, "conditions", Msg(295)), many(5, "addresses", Msg(293)), one(6, "daemonEndpoints", Msg(298)), one(7, "nodeInfo", Msg(309)), many(8, "images", Msg(223)), many(9, "volumesInUse", Str), many(10, "volumesAttached", Msg(196)), one(11, "config", Msg(297)), many(12, "runtimeHandlers", Msg(301)), one(13, "features", Msg(299)), many(14, "declaredFeatures", Str), ] },
    // 308
    Message { name: "api.core.v1.NodeSwapStatus", special: Special::Plain, fields: &[one(1, "capacity", I64), ] },
    // 309
    Message { name: "api.core.v1.NodeSystemInfo", special: Special::Plain, fields: &[one(1, "machineID", Str), one(2, "systemUUID", Str), one(3, "bootID", Str), one(4, "kernelVersion", Str), one(5, "osImage", Str), one(6, "containerRuntimeVersion", Str), one(7, "kubeletVersion", Str), one(8, "kubeProxyVersion", Str), one(9, "operatingSystem", Str), one(10, "architecture", Str), one(11, "swap", Msg(308)), ] },
    // 310
    Message { name: "api.core.v1.ObjectFieldSelector", special: Special::Plain, fields: &[one(1, "apiVersion", Str), one(2, "fieldPath", Str), ] },
    // 311
    Message { name: "api.core.v1.ObjectReference", special: Special::Plain, fields: &[one(1, "kind", Str), one(2, "namespace", Str), one(3, "name", Str), one(4, "uid", Str), one(5, "apiVersion", Str), one(6, "resourceVersion", Str), one(7, "fieldPath", Str), ] },
    // 312
    Message { name: "api.core.v1.PersistentVolume", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(322)), one(3, "status", Msg(323)), ] },
    // 313
    Message { name: "api.core.v1.PersistentVolumeClaim", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(316)), one(3, "status", Msg(317)), ] },
    // 314
    Message { name: "api.core.v1.PersistentVolumeClaimCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastProbeTime", Msg(728)), one(4, "lastTransitionTime", Msg(728)), one(5, "reason", Str), one(6, "message", Str), ] },
    // 315
    Message { name: "api.core.v1.PersistentVolumeClaimList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(313)), ] },
    // 316
    Message { name: "api.core.v1.PersistentVolumeClaimSpec", special: Special::Plain, fields: &[many(1, "accessModes", Str), one(4, "selector", Msg(717)), one(2, "resources", Msg(411)), one(3, "volumeName", Str), one(5, "storageClassName", Str), one(6, "volumeMode", Str), one(7, "dataSource", Msg(403)), one(8, "dataSourceRef", Msg(404)), one(9, "volumeAttributesClassName", Str), ] },
    // 317
    Message { name: "api.core.v1.PersistentVolumeClaimStatus", special: Special::Plain, fields: &[one(1, "phase", Str), many(2, "accessModes", Str), one(3, "capacity", MapMsg(711)), many(4, "conditions", Msg(314)), one(5, "allocatedResources", MapMsg(711)), one(7, "allocatedResourceStatuses", MapStr), one(8, "currentVolumeAttributesClassName", Str), one(9, "modifyVolumeStatus", Msg(285)), ] },
    // 318
    Message { name: "api.core.v1.PersistentVolumeClaimTemplate", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(316)), ] },
    // 319
    Message { name: "api.core.v1.PersistentVolumeClaimVolumeSource", special: Special::Plain, fields: &[one(1, "claimName", Str), one(2, "readOnly", Bool), ] },
    // 320
    Message { name: "api.core.v1.PersistentVolumeList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(312)), ] },
    // 321
    Message { name: "api.core.v1.PersistentVolumeSource", special: Special::Plain, fields: &[one(1, "gcePersistentDisk", Msg(260)), one(2, "awsElasticBlockStore", Msg(197)), one(3, "hostPath", Msg(267)), one(4, "glusterfs", Msg(262)), one(5, "nfs", Msg(291)), one(6, "rbd", Msg(354)), one(7, "iscsi", Msg(271)), one(8, "cinder", Msg(207)), one(9, "cephfs", Msg(205)), one(10, "fc", Msg(255)), one(11, "flocker", Msg(259)), one(12, "flexVolume", Msg(257)), one(13, "azureFile", Msg(199)), one(14, "vsphereVolume", Msg(413)), one(15, "quobyte", Msg(353)), one(16, "azureDisk", Msg(198)), one(17, "photonPersistentDisk", Msg(324)), one(18, "portworxVolume", Msg(348)), one(19, "scaleIO", Msg(370)), one(20, "local", Msg(284)), one(21, "storageos", Msg(394)), one(22, "csi", Msg(202)), ] },
    // 322
    Message { name: "api.core.v1.PersistentVolumeSpec", special: Special::Plain, fields: &[one(1, "capacity", MapMsg(711)), one(2, "", Msg(321)), many(3, "accessModes", Str), one(4, "claimRef", Msg(311)), one(5, "persistentVolumeReclaimPolicy", Str), one(6, "storageClassName", Str), many(7, "mountOptions", Str), one(8, "volumeMode", Str), one(9, "nodeAffinity", Msg(409)), one(10, "volumeAttributesClassName", Str), ] },
    // 323
    Message { name: "api.core.v1.PersistentVolumeStatus", special: Special::Plain, fields: &[one(1, "phase", Str), one(2, "message", Str), one(3, "reason", Str), one(4, "lastPhaseTransitionTime", Msg(728)), ] },
    // 324
    Message { name: "api.core.v1.PhotonPersistentDiskVolumeSource", special: Special::Plain, fields: &[one(1, "pdID", Str), one(2, "fsType", Str), ] },
    // 325
    Message { name: "api.core.v1.Pod", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(342)), one(3, "status", Msg(343)), ] },
    // 326
    Message { name: "api.core.v1.PodAffinity", special: Special::Plain, fields: &[many(1, "requiredDuringSchedulingIgnoredDuringExecution", Msg(327)), many(2, "preferredDuringSchedulingIgnoredDuringExecution", Msg(414)), ] },
    // 327
    Message { name: "api.core.v1.PodAffinityTerm", special: Special::Plain, fields: &[one(1, "labelSelector", Msg(717)), many(2, "namespaces", Str), one(3, "topologyKey", Str), one(4, "namespaceSelector", Msg(717)), many(5, "matchLabelKeys", Str), many(6, "mismatchLabelKeys", Str), ] },
    // 328
    Message { name: "api.core.v1.PodAntiAffinity", special: Special::Plain, fields: &[many(1, "requiredDuringSchedulingIgnoredDuringExecution", Msg(327)), many(2, "preferredDuringSchedulingIgnoredDuringExecution", Msg(414)), ] },
    // 329
    Message { name: "api.core.v1.PodCertificateProjection", special: Special::Plain, fields: &[one(1, "signerName", Str), one(2, "keyType", Str), one(3, "maxExpirationSeconds", I32), one(4, "credentialBundlePath", Str), one(5, "keyPath", Str), one(6, "certificateChainPath", Str), one(7, "userAnnotations", MapStr), ] },
    // 330
    Message { name: "api.core.v1.PodCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(7, "observedGeneration", I64), one(2, "status", Str), one(3, "lastProbeTime", Msg(728)), one(4, "lastTransitionTime", Msg(728)), one(5, "reason", Str), one(6, "message", Str), ] },
    // 331
    Message { name: "api.core.v1.PodDnsConfig", special: Special::Plain, fields: &[many(1, "nameservers", Str), many(2, "searches", Str), many(3, "options", Msg(332)), ] },
    // 332
    Message { name: "api.core.v1.PodDnsConfigOption", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "value", Str), ] },
    // 333
    Message { name: "api.core.v1.PodExtendedResourceClaimStatus", special: Special::Plain, fields: &[many(1, "requestMappings", Msg(222)), one(2, "resourceClaimName", Str), ] },
    // 334
    Message { name: "api.core.v1.PodIp", special: Special::Plain, fields: &[one(1, "ip", Str), ] },
    // 335
    Message { name: "api.core.v1.PodList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(325)), ] },
    // 336
    Message { name: "api.core.v1.PodOs", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 337
    Message { name: "api.core.v1.PodReadinessGate", special: Special::Plain, fields: &[one(1, "conditionType", Str), ] },
    // 338
    Message { name: "api.core.v1.PodResourceClaim", special: Special::Plain, fields: &[one(1, "name", Str), one(3, "resourceClaimName", Str), one(4, "resourceClaimTemplateName", Str), ] },
    // 339
    Message { name: "api.core.v1.PodResourceClaimStatus", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "resourceClaimName", Str), ] },
    // 340
    Message { name: "api.core.v1.PodSchedulingGate", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 341
    Message { name: "api.core.v1.PodSecurityContext", special: Special::Plain, fields: &[one(1, "seLinuxOptions", Msg(374)), one(8, "windowsOptions", Msg(415)), one(2, "runAsUser", I64), one(6, "runAsGroup", I64), one(3, "runAsNonRoot", Bool), many(4, "supplementalGroups", I64), one(12, "supplementalGroupsPolicy", Str), one(5, "fsGroup", I64), many(7, "sysctls", Msg(396)), one(9, "fsGroupChangePolicy", Str), one(10, "seccompProfile", Msg(375)), one(11, "appArmorProfile", Msg(195)), one(13, "seLinuxChangePolicy", Str), ] },
    // 342
    Message { name: "api.core.v1.PodSpec", special: Special::Plain, fields: &[many(1, "volumes", Msg(405)), many(20, "initContainers", Msg(221)), many(2, "containers", Msg(221)), many(34, "ephemeralContainers", Msg(247)), one(3, "restartPolicy", Str), one(4, "terminationGracePeriodSeconds", I64), one(5, "activeDeadlineSeconds", I64), one(6, "dnsPolicy", Str), one(7, "nodeSelector", MapStr), one(8, "serviceAccountName", Str), one(9, "serviceAccount", Str), one(21, "automountServiceAccountToken", Bool), one(10, "nodeName", Str), one(11, "hostNetwork", Bool), one(12, "hostPID", Bool), one(13, "hostIPC", Bool), one(27, "shareProcessNamespace", Bool), one(14, "securityContext", Msg(341)), many(15, "imagePullSecrets", Msg(283)), one(16, "hostname", Str), one(17, "subdomain", Str), one(18, "affinity", Msg(194)), one(19, "schedulerName", Str), many(22, "tolerations", Msg(399)), many(23, "hostAliases", Msg(265)), one(24, "priorityClassName", Str), one(25, "priority", I32), one(26, "dnsConfig", Msg(331)), many(28, "readinessGates", Msg(337)), one(29, "runtimeClassName", Str), one(30, "enableServiceLinks", Bool), one(31, "preemptionPolicy", Str), one(32, "overhead", MapMsg(711)), many(33, "topologySpreadConstraints", Msg(402)), one(35, "setHostnameAsFQDN", Bool), one(36, "os", Msg(336)), one(37, "hostUsers", Bool), many(38, "schedulingGates", Msg(340)), many(39, "resourceClaims", Msg(338)), one(40, "resources", Msg(368)), one(41, "hostnameOverride", Str), one(42, "workloadRef", Msg(416)), ] },
    // 343
    Message { name: "api.core.v1.PodStatus", special: Special::Plain, fields: &[one(17, "observedGeneration", I64), one(1, "phase", Str), many(2, "conditions", Msg(330)), one(3, "message", Str), one(4, "reason", Str), one(11, "nominatedNodeName", Str), one(5, "hostIP", Str), many(16, "hostIPs", Msg(266)), one(6, "podIP", Str), many(12, "podIPs", Msg(334)), one(7, "startTime", Msg(728)), many(10, "initContainerStatuses", Msg(232)), many(8, "containerStatuses", Msg(232)), one(9, "qosClass", Str), many(13, "ephemeralContainerStatuses", Msg(232)), one(14, "resize", Str), many(15, "resourceClaimStatuses", Msg(339)), one(18, "extendedResourceClaimStatus", Msg(333)), one(19, "allocatedResources", MapMsg(711)), one(20, "resources", Msg(368)), ] },
    // 344
    Message { name: "api.core.v1.PodTemplate", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "template", Msg(346)), ] },
    // 345
    Message { name: "api.core.v1.PodTemplateList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(344)), ] },
    // 346
    Message { name: "api.core.v1.PodTemplateSpec", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(342)), ] },
    // 347
    Message { name: "api.core.v1.PortStatus", special: Special::Plain, fields: &[one(1, "port", I32), one(2, "protocol", Str), one(3, "error", Str), ] },
    // 348
    Message { name: "api.core.v1.PortworxVolumeSource", special: Special::Plain, fields: &[one(1, "volumeID", Str), one(2, "fsType", Str), one(3, "readOnly", Bool), ] },
    // 349
    Message { name: "api.core.v1.PreferredSchedulingTerm", special: Special::Plain, fields: &[one(1, "weight", I32), one(2, "preference", Msg(305)), ] },
    // 350
    Message { name: "api.core.v1.Probe", special: Special::Plain, fields: &[one(1, "", Msg(351)), one(2, "initialDelaySeconds", I32), one(3, "timeoutSeconds", I32), one(4, "periodSeconds", I32), one(5, "successThreshold", I32), one(6, "failureThreshold", I32), one(7, "terminationGracePeriodSeconds", I64), ] },
    // 351
    Message { name: "api.core.v1.ProbeHandler", special: Special::Plain, fields: &[one(1, "exec", Msg(254)), one(2, "httpGet", Msg(268)), one(3, "tcpSocket", Msg(398)), one(4, "grpc", Msg(264)), ] },
    // 352
    Message { name: "api.core.v1.ProjectedVolumeSource", special: Special::Plain, fields: &[many(1, "sources", Msg(410)), one(2, "defaultMode", I32), ] },
    // 353
    Message { name: "api.core.v1.QuobyteVolumeSource", special: Special::Plain, fields: &[one(1, "registry", Str), one(2, "volume", Str), one(3, "readOnly", Bool), one(4, "user", Str), one(5, "group", Str), one(6, "tenant", Str), ] },
    // 354
    Message { name: "api.core.v1.RbdPersistentVolumeSource", special: Special::Plain, fields: &[many(1, "monitors", Str), one(2, "image", Str), one(3, "fsType", Str), one(4, "pool", Str), one(5, "user", Str), one(6, "keyring", Str), one(7, "secretRef", Msg(381)), one(8, "readOnly", Bool), ] },
    // 355
    Message { name: "api.core.v1.RbdVolumeSource", special: Special::Plain, fields: &[many(1, "monitors", Str), one(2, "image", Str), one(3, "fsType", Str), one(4, "pool", Str), one(5, "user", Str), one(6, "keyring", Str), one(7, "secretRef", Msg(283)), one(8, "readOnly", Bool), ] },
    // 356
    Message { name: "api.core.v1.ReplicationController", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(359)), one(3, "status", Msg(360)), ] },
    // 357
    Message { name: "api.core.v1.ReplicationControllerCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 358
    Message { name: "api.core.v1.ReplicationControllerList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(356)), ] },
    // 359
    Message { name: "api.core.v1.ReplicationControllerSpec", special: Special::Plain, fields: &[one(1, "replicas", I32), one(4, "minReadySeconds", I32), one(2, "selector", MapStr), one(3, "template", Msg(346)), ] },
    // 360
    Message { name: "api.core.v1.ReplicationControllerStatus", special: Special::Plain, fields: &[one(1, "replicas", I32), one(2, "fullyLabeledReplicas", I32), one(4, "readyReplicas", I32), one(5, "availableReplicas", I32), one(3, "observedGeneration", I64), many(6, "conditions", Msg(357)), ] },
    // 361
    Message { name: "api.core.v1.ResourceClaim", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "request", Str), ] },
    // 362
    Message { name: "api.core.v1.ResourceFieldSelector", special: Special::Plain, fields: &[one(1, "containerName", Str), one(2, "resource", Str), one(3, "divisor", Msg(711)), ] },
    // 363
    Message { name: "api.core.v1.ResourceHealth", special: Special::Plain, fields: &[one(1, "resourceID", Str), one(2, "health", Str), ] },
    // 364
    Message { name: "api.core.v1.ResourceQuota", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(366)), one(3, "status", Msg(367)), ] },
    // 365
    Message { name: "api.core.v1.ResourceQuotaList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(364)), ] },
    // 366
    Message { name: "api.core.v1.ResourceQuotaSpec", special: Special::Plain, fields: &[one(1, "hard", MapMsg(711)), many(2, "scopes", Str), one(3, "scopeSelector", Msg(372)), ] },
    // 367
    Message { name: "api.core.v1.ResourceQuotaStatus", special: Special::Plain, fields: &[one(1, "hard", MapMsg(711)), one(2, "used", MapMsg(711)), ] },
    // 368
    Message { name: "api.core.v1.ResourceRequirements", special: Special::Plain, fields: &[one(1, "limits", MapMsg(711)), one(2, "requests", MapMsg(711)), many(3, "claims", Msg(361)), ] },
    // 369
    Message { name: "api.core.v1.ResourceStatus", special: Special::Plain, fields: &[one(1, "name", Str), many(2, "resources", Msg(363)), ] },
    // 370
    Message { name: "api.core.v1.ScaleIoPersistentVolumeSource", special: Special::Plain, fields: &[one(1, "gateway", Str), one(2, "system", Str), one(3, "secretRef", Msg(381)), one(4, "sslEnabled", Bool), one(5, "protectionDomain", Str), one(6, "storagePool", Str), one(7, "storageMode", Str), one(8, "volumeName", Str), one(9, "fsType", Str), one(10, "readOnly", Bool), ] },
    // 371
    Message { name: "api.core.v1.ScaleIoVolumeSource", special: Special::Plain, fields: &[one(1, "gateway", Str), one(2, "system", Str), one(3, "secretRef", Msg(283)), one(4, "sslEnabled", Bool), one(5, "protectionDomain", Str), one(6, "storagePool", Str), one(7, "storageMode", Str), one(8, "volumeName", Str), one(9, "fsType", Str), one(10, "readOnly", Bool), ] },
    // 372
    Message { name: "api.core.v1.ScopeSelector", special: Special::Plain, fields: &[many(1, "matchExpressions", Msg(373)), ] },
    // 373
    Message { name: "api.core.v1.ScopedResourceSelectorRequirement", special: Special::Plain, fields: &[one(1, "scopeName", Str), one(2, "operator", Str), many(3, "values", Str), ] },
    // 374
    Message { name: "api.core.v1.SeLinuxOptions", special: Special::Plain, fields: &[one(1, "user", Str), one(2, "role", Str), one(3, "type", Str), one(4, "level", Str), ] },
    // 375
    Message { name: "api.core.v1.SeccompProfile", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "localhostProfile", Str), ] },
    // 376
    Message { name: "api.core.v1.Secret", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(5, "immutable", Bool), one(2, "data", MapBytes), one(4, "stringData", MapStr), one(3, "type", Str), ] },
    // 377
    Message { name: "api.core.v1.SecretEnvSource", special: Special::Plain, fields: &[one(1, "", Msg(283)), one(2, "optional", Bool), ] },
    // 378
    Message { name: "api.core.v1.SecretKeySelector", special: Special::Plain, fields: &[one(1, "", Msg(283)), one(2, "key", Str), one(3, "optional", Bool), ] },
    // 379
    Message { name: "api.core.v1.SecretList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(376)), ] },
    // 380
    Message { name: "api.core.v1.SecretProjection", special: Special::Plain, fields: &[one(1, "", Msg(283)), many(2, "items", Msg(273)), one(4, "optional", Bool), ] },
    // 381
    Message { name: "api.core.v1.SecretReference", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "namespace", Str), ] },
    // 382
    Message { name: "api.core.v1.SecretVolumeSource", special: Special::Plain, fields: &[one(1, "secretName", Str), many(2, "items", Msg(273)), one(3, "defaultMode", I32), one(4, "optional", Bool), ] },
    // 383
    Message { name: "api.core.v1.SecurityContext", special: Special::Plain, fields: &[one(1, "capabilities", Msg(204)), one(2, "privileged", Bool), one(3, "seLinuxOptions", Msg(374)), one(10, "windowsOptions", Msg(415)), one(4, "runAsUser", I64), one(8, "runAsGroup", I64), one(5, "runAsNonRoot", Bool), one(6, "readOnlyRootFilesystem", Bool), one(7, "allowPrivilegeEscalation", Bool), one(9, "procMount", Str), one(11, "seccompProfile", Msg(375)), one(12, "appArmorProfile", Msg(195)), ] },
    // 384
    Message { name: "api.core.v1.Service", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(390)), one(3, "status", Msg(391)), ] },
    // 385
    Message { name: "api.core.v1.ServiceAccount", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "secrets", Msg(311)), many(3, "imagePullSecrets", Msg(283)), one(4, "automountServiceAccountToken", Bool), ] },
    // 386
    Message { name: "api.core.v1.ServiceAccountList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(385)), ] },
    // 387
    Message { name: "api.core.v1.ServiceAccountTokenProjection", special: Special::Plain, fields: &[one(1, "audience", Str), one(2, "expirationSeconds", I64), one(3, "path", Str), ] },
    // 388
    Message { name: "api.core.v1.ServiceList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(384)), ] },
    // 389
    Message { name: "api.core.v1.ServicePort", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "protocol", Str), one(6, "appProtocol", Str), one(3, "port", I32), one(4, "targetPort", Msg(731)), one(5, "nodePort", I32), ] },
    // 390
    Message { name: "api.core.v1.ServiceSpec", special: Special::Plain, fields: &[many(1, "ports", Msg(389)), one(2, "selector", MapStr), one(3, "clusterIP", Str), many(18, "clusterIPs", Str), one(4, "type", Str), many(5, "externalIPs", Str), one(7, "sessionAffinity", Str), one(8, "loadBalancerIP", Str), many(9, "loadBalancerSourceRanges", Str), one(10, "externalName", Str), one(11, "externalTrafficPolicy", Str), one(12, "healthCheckNodePort", I32), one(13, "publishNotReadyAddresses", Bool), one(14, "sessionAffinityConfig", Msg(392)), many(19, "ipFamilies", Str), one(17, "ipFamilyPolicy", Str), one(20, "allocateLoadBalancerNodePorts", Bool), one(21, "loadBalancerClass", Str), one(22, "internalTrafficPolicy", Str), one(23, "trafficDistribution", Str), ] },
    // 391
    Message { name: "api.core.v1.ServiceStatus", special: Special::Plain, fields: &[one(1, "loadBalancer", Msg(282)), many(2, "conditions", Msg(712)), ] },
    // 392
    Message { name: "api.core.v1.SessionAffinityConfig", special: Special::Plain, fields: &[one(1, "clientIP", Msg(209)), ] },
    // 393
    Message { name: "api.core.v1.SleepAction", special: Special::Plain, fields: &[one(1, "seconds", I64), ] },
    // 394
    Message { name: "api.core.v1.StorageOsPersistentVolumeSource", special: Special::Plain, fields: &[one(1, "volumeName", Str), one(2, "volumeNamespace", Str), one(3, "fsType", Str), one(4, "readOnly", Bool), one(5, "secretRef", Msg(311)), ] },
    // 395
    Message { name: "api.core.v1.StorageOsVolumeSource", special: Special::Plain, fields: &[one(1, "volumeName", Str), one(2, "volumeNamespace", Str), one(3, "fsType", Str), one(4, "readOnly", Bool), one(5, "secretRef", Msg(283)), ] },
    // 396
    Message { name: "api.core.v1.Sysctl", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "value", Str), ] },
    // 397
    Message { name: "api.core.v1.Taint", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "value", Str), one(3, "effect", Str), one(4, "timeAdded", Msg(728)), ] },
    // 398
    Message { name: "api.core.v1.TcpSocketAction", special: Special::Plain, fields: &[one(1, "port", Msg(731)), one(2, "host", Str), ] },
    // 399
    Message { name: "api.core.v1.Toleration", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "operator", Str), one(3, "value", Str), one(4, "effect", Str), one(5, "tolerationSeconds", I64), ] },
    // 400
    Message { name: "api.core.v1.TopologySelectorLabelRequirement", special: Special::Plain, fields: &[one(1, "key", Str), many(2, "values", Str), ] },
    // 401
    Message { name: "api.core.v1.TopologySelectorTerm", special: Special::Plain, fields: &[many(1, "matchLabelExpressions", Msg(400)), ] },
    // 402
    Message { name: "api.core.v1.TopologySpreadConstraint", special: Special::Plain, fields: &[one(1, "maxSkew", I32), one(2, "topologyKey", Str), one(3, "whenUnsatisfiable", Str), one(4, "labelSelector", Msg(717)), one(5, "minDomains", I32), one(6, "nodeAffinityPolicy", Str), one(7, "nodeTaintsPolicy", Str), many(8, "matchLabelKeys", Str), ] },
    // 403
    Message { name: "api.core.v1.TypedLocalObjectReference", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str), ] },
    // 404
    Message { name: "api.core.v1.TypedObjectReference", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str), one(4, "namespace", Str), ] },
    // 405
    Message { name: "api.core.v1.Volume", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "", Msg(412)), ] },
    // 406
    Message { name: "api.core.v1.VolumeDevice", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "devicePath", Str), ] },
    // 407
    Message { name: "api.core.v1.VolumeMount", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "readOnly", Bool), one(7, "recursiveReadOnly", Str), one(3, "mountPath", Str), one(4, "subPath", Str), one(5, "mountPropagation", Str), one(6, "subPathExpr", Str), ] },
    // 408
    Message { name: "api.core.v1.VolumeMountStatus", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "mountPath", Str), one(3, "readOnly", Bool), one(4, "recursiveReadOnly", Str), ] },
    // 409
    Message { name: "api.core.v1.VolumeNodeAffinity", special: Special::Plain, fields: &[one(1, "required", Msg(303)), ] },
    // 410
    Message { name: "api.core.v1.VolumeProjection", special: Special::Plain, fields: &[one(1, "secret", Msg(380)), one(2, "downwardAPI", Msg(235)), one(3, "configMap", Msg(219)), one(4, "serviceAccountToken", Msg(387)), one(5, "clusterTrustBundle", Msg(210)), one(6, "podCertificate", Msg(329)), ] },
    // 411
    Message { name: "api.core.v1.VolumeResourceRequirements", special: Special::Plain, fields: &[one(1, "limits", MapMsg(711)), one(2, "requests", MapMsg(711)), ] },
    // 412
    Message { name: "api.core.v1.VolumeSource", special: Special::Plain, fields: &[one(1, "hostPath", Msg(267)), one(2, "emptyDir", Msg(238)), one(3, "gcePersistentDisk", Msg(260)), one(4, "awsElasticBlockStore", Msg(197)), one(5, "gitRepo", Msg(261)), one(6, "secret", Msg(382)), one(7, "nfs", Msg(291)), one(8, "iscsi", Msg(272)), one(9, "glusterfs", Msg(263)), one(10, "persistentVolumeClaim", Msg(319)), one(11, "rbd", Msg(355)), one(12, "flexVolume", Msg(258)), one(13, "cinder", Msg(208)), one(14, "cephfs", Msg(206)), one(15, "flocker", Msg(259)), one(16, "downwardAPI", Msg(237)), one(17, "fc", Msg(255)), one(18, "azureFile", Msg(200)), one(19, "configMap", Msg(220)), one(20, "vsphereVolume", Msg(413)), one(21, "quobyte", Msg(353)), one(22, "azureDisk", Msg(198)), one(23, "photonPersistentDisk", Msg(324)), one(26, "projected", Msg(352)), one(24, "portworxVolume", Msg(348)), one(25, "scaleIO", Msg(371)), one(27, "storageos", Msg(395)), one(28, "csi", Msg(203)), one(29, "ephemeral", Msg(249)), one(30, "image", Msg(270)), ] },
    // 413
    Message { name: "api.core.v1.VsphereVirtualDiskVolumeSource", special: Special::Plain, fields: &[one(1, "volumePath", Str), one(2, "fsType", Str), one(3, "storagePolicyName", Str), one(4, "storagePolicyID", Str), ] },
    // 414
    Message { name: "api.core.v1.WeightedPodAffinityTerm", special: Special::Plain, fields: &[one(1, "weight", I32), one(2, "podAffinityTerm", Msg(327)), ] },
    // 415
    Message { name: "api.core.v1.WindowsSecurityContextOptions", special: Special::Plain, fields: &[one(1, "gmsaCredentialSpecName", Str), one(2, "gmsaCredentialSpec", Str), one(3, "runAsUserName", Str), one(4, "hostProcess", Bool), ] },
    // 416
    Message { name: "api.core.v1.WorkloadReference", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "podGroup", Str), one(3, "podGroupReplicaKey", Str), ] },
    // 417
    Message { name: "api.discovery.v1.Endpoint", special: Special::Plain, fields: &[many(1, "addresses", Str), one(2, "conditions", Msg(418)), one(3, "hostname", Str), one(4, "targetRef", Msg(311)), one(5, "deprecatedTopology", MapStr), one(6, "nodeName", Str), one(7, "zone", Str), one(8, "hints", Msg(419)), ] },
    // 418
    Message { name: "api.discovery.v1.EndpointConditions", special: Special::Plain, fields: &[one(1, "ready", Bool), one(2, "serving", Bool), one(3, "terminating", Bool), ] },
    // 419
    Message { name: "api.discovery.v1.EndpointHints", special: Special::Plain, fields: &[many(1, "forZones", Msg(424)), many(2, "forNodes", Msg(423)), ] },
    // 420
    Message { name: "api.discovery.v1.EndpointPort", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "protocol", Str), one(3, "port", I32), one(4, "appProtocol", Str), ] },
    // 421
    Message { name: "api.discovery.v1.EndpointSlice", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(4, "addressType", Str), many(2, "endpoints", Msg(417)), many(3, "ports", Msg(420)), ] },
    // 422
    Message { name: "api.discovery.v1.EndpointSliceList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(421)), ] },
    // 423
    Message { name: "api.discovery.v1.ForNode", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 424
    Message { name: "api.discovery.v1.ForZone", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 425
    Message { name: "api.events.v1.Event", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "eventTime", Msg(721)), one(3, "series", Msg(427)), one(4, "reportingController", Str), one(5, "reportingInstance", Str), one(6, "action", Str), one(7, "reason", Str), one(8, "regarding", Msg(311)), one(9, "related", Msg(311)), one(10, "note", Str), one(11, "type", Str), one(12, "deprecatedSource", Msg(253)), one(13, "deprecatedFirstTimestamp", Msg(728)), one(14, "deprecatedLastTimestamp", Msg(728)), one(15, "deprecatedCount", I32), ] },
    // 426
    Message { name: "api.events.v1.EventList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(425)), ] },
    // 427
    Message { name: "api.events.v1.EventSeries", special: Special::Plain, fields: &[one(1, "count", I32), one(2, "lastObservedTime", Msg(721)), ] },
    // 428
    Message { name: "api.flowcontrol.v1.ExemptPriorityLevelConfiguration", special: Special::Plain, fields: &[one(1, "nominalConcurrencyShares", I32), one(2, "lendablePercent", I32), ] },
    // 429
    Message { name: "api.flowcontrol.v1.FlowDistinguisherMethod", special: Special::Plain, fields: &[one(1, "type", Str), ] },
    // 430
    Message { name: "api.flowcontrol.v1.FlowSchema", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(433)), one(3, "status", Msg(434)), ] },
    // 431
    Message { name: "api.flowcontrol.v1.FlowSchemaCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 432
    Message { name: "api.flowcontrol.v1.FlowSchemaList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(430)), ] },
    // 433
    Message { name: "api.flowcontrol.v1.FlowSchemaSpec", special: Special::Plain, fields: &[one(1, "priorityLevelConfiguration", Msg(443)), one(2, "matchingPrecedence", I32), one(3, "distinguisherMethod", Msg(429)), many(4, "rules", Msg(439)), ] },
    // 434
    Message { name: "api.flowcontrol.v1.FlowSchemaStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(431)), ] },
    // 435
    Message { name: "api.flowcontrol.v1.GroupSubject", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 436
    Message { name: "api.flowcontrol.v1.LimitResponse", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "queuing", Msg(446)), ] },
    // 437
    Message { name: "api.flowcontrol.v1.LimitedPriorityLevelConfiguration", special: Special::Plain, fields: &[one(1, "nominalConcurrencyShares", I32), one(2, "limitResponse", Msg(436)), one(3, "lendablePercent", I32), one(4, "borrowingLimitPercent", I32), ] },
    // 438
    Message { name: "api.flowcontrol.v1.NonResourcePolicyRule", special: Special::Plain, fields: &[many(1, "verbs", Str), many(6, "nonResourceURLs", Str), ] },
    // 439
    Message { name: "api.flowcontrol.v1.PolicyRulesWithSubjects", special: Special::Plain, fields: &[many(1, "subjects", Msg(449)), many(2, "resourceRules", Msg(447)), many(3, "nonResourceRules", Msg(438)), ] },
    // 440
    Message { name: "api.flowcontrol.v1.PriorityLevelConfiguration", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(444)), one(3, "status", Msg(445)), ] },
    // 441
    Message { name: "api.flowcontrol.v1.PriorityLevelConfigurationCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 442
    Message { name: "api.flowcontrol.v1.PriorityLevelConfigurationList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(440)), ] },
    // 443
    Message { name: "api.flowcontrol.v1.PriorityLevelConfigurationReference", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 444
    Message { name: "api.flowcontrol.v1.PriorityLevelConfigurationSpec", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "limited", Msg(437)), one(3, "exempt", Msg(428)), ] },
    // 445
    Message { name: "api.flowcontrol.v1.PriorityLevelConfigurationStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(441)), ] },
    // 446
    Message { name: "api.flowcontrol.v1.QueuingConfiguration", special: Special::Plain, fields: &[one(1, "queues", I32), one(2, "handSize", I32), one(3, "queueLengthLimit", I32), ] },
    // 447
    Message { name: "api.flowcontrol.v1.ResourcePolicyRule", special: Special::Plain, fields: &[many(1, "verbs", Str), many(2, "apiGroups", Str), many(3, "resources", Str), one(4, "clusterScope", Bool), many(5, "namespaces", Str), ] },
    // 448
    Message { name: "api.flowcontrol.v1.ServiceAccountSubject", special: Special::Plain, fields: &[one(1, "namespace", Str), one(2, "name", Str), ] },
    // 449
    Message { name: "api.flowcontrol.v1.Subject", special: Special::Plain, fields: &[one(1, "kind", Str), one(2, "user", Msg(450)), one(3, "group", Msg(435)), one(4, "serviceAccount", Msg(448)), ] },
    // 450
    Message { name: "api.flowcontrol.v1.UserSubject", special: Special::Plain, fields: &[one(1, "name", Str), ] },
    // 451
    Message { name: "api.networking.v1.HttpIngressPath", special: Special::Plain, fields: &[one(1, "path", Str), one(3, "pathType", Str), one(2, "backend", Msg(457)), ] },
    // 452
    Message { name: "api.networking.v1.HttpIngressRuleValue", special: Special::Plain, fields: &[many(1, "paths", Msg(451)), ] },
    // 453
    Message { name: "api.networking.v1.IPAddress", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(455)), ] },
    // 454
    Message { name: "api.networking.v1.IPAddressList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(453)), ] },
    // 455
    Message { name: "api.networking.v1.IPAddressSpec", special: Special::Plain, fields: &[one(1, "parentRef", Msg(480)), ] },
    // 456
    Message { name: "api.networking.v1.Ingress", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(469)), one(3, "status", Msg(470)), ] },
    // 457
    Message { name: "api.networking.v1.IngressBackend", special: Special::Plain, fields: &[one(4, "service", Msg(468)), one(3, "resource", Msg(403)), ] },
    // 458
    Message { name: "api.networking.v1.IngressClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(461)), ] },
    // 459
    Message { name: "api.networking.v1.IngressClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(458)), ] },
    // 460
    Message { name: "api.networking.v1.IngressClassParametersReference", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str), one(4, "scope", Str), one(5, "namespace", Str), ] },
    // 461
    Message { name: "api.networking.v1.IngressClassSpec", special: Special::Plain, fields: &[one(1, "controller", Str), one(2, "parameters", Msg(460)), ] },
    // 462
    Message { name: "api.networking.v1.IngressList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(456)), ] },
    // 463
    Message { name: "api.networking.v1.IngressLoadBalancerIngress", special: Special::Plain, fields: &[one(1, "ip", Str), one(2, "hostname", Str), many(4, "ports", Msg(465)), ] },
    // 464
    Message { name: "api.networking.v1.IngressLoadBalancerStatus", special: Special::Plain, fields: &[many(1, "ingress", Msg(463)), ] },
    // 465
    Message { name: "api.networking.v1.IngressPortStatus", special: Special::Plain, fields: &[one(1, "port", I32), one(2, "protocol", Str), one(3, "error", Str), ] },
    // 466
    Message { name: "api.networking.v1.IngressRule", special: Special::Plain, fields: &[one(1, "host", Str), one(2, "", Msg(467)), ] },
    // 467
    Message { name: "api.networking.v1.IngressRuleValue", special: Special::Plain, fields: &[one(1, "http", Msg(452)), ] },
    // 468
    Message { name: "api.networking.v1.IngressServiceBackend", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "port", Msg(481)), ] },
    // 469
    Message { name: "api.networking.v1.IngressSpec", special: Special::Plain, fields: &[one(4, "ingressClassName", Str), one(1, "defaultBackend", Msg(457)), many(2, "tls", Msg(471)), many(3, "rules", Msg(466)), ] },
    // 470
    Message { name: "api.networking.v1.IngressStatus", special: Special::Plain, fields: &[one(1, "loadBalancer", Msg(464)), ] },
    // 471
    Message { name: "api.networking.v1.IngressTls", special: Special::Plain, fields: &[many(1, "hosts", Str), one(2, "secretName", Str), ] },
    // 472
    Message { name: "api.networking.v1.IpBlock", special: Special::Plain, fields: &[one(1, "cidr", Str), many(2, "except", Str), ] },
    // 473
    Message { name: "api.networking.v1.NetworkPolicy", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(479)), ] },
    // 474
    Message { name: "api.networking.v1.NetworkPolicyEgressRule", special: Special::Plain, fields: &[many(1, "ports", Msg(478)), many(2, "to", Msg(477)), ] },
    // 475
    Message { name: "api.networking.v1.NetworkPolicyIngressRule", special: Special::Plain, fields: &[many(1, "ports", Msg(478)), many(2, "from", Msg(477)), ] },
    // 476
    Message { name: "api.networking.v1.NetworkPolicyList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(473)), ] },
    // 477
    Message { name: "api.networking.v1.NetworkPolicyPeer", special: Special::Plain, fields: &[one(1, "podSelector", Msg(717)), one(2, "namespaceSelector", Msg(717)), one(3, "ipBlock", Msg(472)), ] },
    // 478
    Message { name: "api.networking.v1.NetworkPolicyPort", special: Special::Plain, fields: &[one(1, "protocol", Str), one(2, "port", Msg(731)), one(3, "endPort", I32), ] },
    // 479
    Message { name: "api.networking.v1.NetworkPolicySpec", special: Special::Plain, fields: &[one(1, "podSelector", Msg(717)), many(2, "ingress", Msg(475)), many(3, "egress", Msg(474)), many(4, "policyTypes", Str), ] },
    // 480
    Message { name: "api.networking.v1.ParentReference", special: Special::Plain, fields: &[one(1, "group", Str), one(2, "resource", Str), one(3, "namespace", Str), one(4, "name", Str), ] },
    // 481
    Message { name: "api.networking.v1.ServiceBackendPort", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "number", I32), ] },
    // 482
    Message { name: "api.networking.v1.ServiceCIDR", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(484)), one(3, "status", Msg(485)), ] },
    // 483
    Message { name: "api.networking.v1.ServiceCIDRList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(482)), ] },
    // 484
    Message { name: "api.networking.v1.ServiceCIDRSpec", special: Special::Plain, fields: &[many(1, "cidrs", Str), ] },
    // 485
    Message { name: "api.networking.v1.ServiceCIDRStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(712)), ] },
    // 486
    Message { name: "api.networking.v1beta1.IPAddress", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(488)), ] },
    // 487
    Message { name: "api.networking.v1beta1.IPAddressList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(486)), ] },
    // 488
    Message { name: "api.networking.v1beta1.IPAddressSpec", special: Special::Plain, fields: &[one(1, "parentRef", Msg(489)), ] },
    // 489
    Message { name: "api.networking.v1beta1.ParentReference", special: Special::Plain, fields: &[one(1, "group", Str), one(2, "resource", Str), one(3, "namespace", Str), one(4, "name", Str), ] },
    // 490
    Message { name: "api.networking.v1beta1.ServiceCIDR", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(492)), one(3, "status", Msg(493)), ] },
    // 491
    Message { name: "api.networking.v1beta1.ServiceCIDRList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(490)), ] },
    // 492
    Message { name: "api.networking.v1beta1.ServiceCIDRSpec", special: Special::Plain, fields: &[many(1, "cidrs", Str), ] },
    // 493
    Message { name: "api.networking.v1beta1.ServiceCIDRStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(712)), ] },
    // 494
    Message { name: "api.node.v1.Overhead", special: Special::Plain, fields: &[one(1, "podFixed", MapMsg(711)), ] },
    // 495
    Message { name: "api.node.v1.RuntimeClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "handler", Str), one(3, "overhead", Msg(494)), one(4, "scheduling", Msg(497)), ] },
    // 496
    Message { name: "api.node.v1.RuntimeClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(495)), ] },
    // 497
    Message { name: "api.node.v1.Scheduling", special: Special::Plain, fields: &[one(1, "nodeSelector", MapStr), many(2, "tolerations", Msg(399)), ] },
    // 498
    Message { name: "api.policy.v1.Eviction", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "deleteOptions", Msg(713)), ] },
    // 499
    Message { name: "api.policy.v1.PodDisruptionBudget", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(501)), one(3, "status", Msg(502)), ] },
    // 500
    Message { name: "api.policy.v1.PodDisruptionBudgetList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(499)), ] },
    // 501
    Message { name: "api.policy.v1.PodDisruptionBudgetSpec", special: Special::Plain, fields: &[one(1, "minAvailable", Msg(731)), one(2, "selector", Msg(717)), one(3, "maxUnavailable", Msg(731)), one(4, "unhealthyPodEvictionPolicy", Str), ] },
    // 502
    Message { name: "api.policy.v1.PodDisruptionBudgetStatus", special: Special::Plain, fields: &[one(1, "observedGeneration", I64), one(2, "disruptedPods", MapMsg(728)), one(3, "disruptionsAllowed", I32), one(4, "currentHealthy", I32), one(5, "desiredHealthy", I32), one(6, "expectedPods", I32), many(7, "conditions", Msg(712)), ] },
    // 503
    Message { name: "api.rbac.v1.AggregationRule", special: Special::Plain, fields: &[many(1, "clusterRoleSelectors", Msg(717)), ] },
    // 504
    Message { name: "api.rbac.v1.ClusterRole", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "rules", Msg(508)), one(3, "aggregationRule", Msg(503)), ] },
    // 505
    Message { name: "api.rbac.v1.ClusterRoleBinding", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "subjects", Msg(514)), one(3, "roleRef", Msg(513)), ] },
    // 506
    Message { name: "api.rbac.v1.ClusterRoleBindingList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(505)), ] },
    // 507
    Message { name: "api.rbac.v1.ClusterRoleList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(504)), ] },
    // 508
    Message { name: "api.rbac.v1.PolicyRule", special: Special::Plain, fields: &[many(1, "verbs", Str), many(2, "apiGroups", Str), many(3, "resources", Str), many(4, "resourceNames", Str), many(5, "nonResourceURLs", Str), ] },
    // 509
    Message { name: "api.rbac.v1.Role", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "rules", Msg(508)), ] },
    // 510
    Message { name: "api.rbac.v1.RoleBinding", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), many(2, "subjects", Msg(514)), one(3, "roleRef", Msg(513)), ] },
    // 511
    Message { name: "api.rbac.v1.RoleBindingList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(510)), ] },
    // 512
    Message { name: "api.rbac.v1.RoleList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(509)), ] },
    // 513
    Message { name: "api.rbac.v1.RoleRef", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str), ] },
    // 514
    Message { name: "api.rbac.v1.Subject", special: Special::Plain, fields: &[one(1, "kind", Str), one(2, "apiGroup", Str), one(3, "name", Str), one(4, "namespace", Str), ] },
    // 515
    Message { name: "api.resource.v1.AllocatedDeviceStatus", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "pool", Str), one(3, "device", Str), one(7, "shareID", Str), many(4, "conditions", Msg(712)), one(5, "data", Msg(730)), one(6, "networkData", Msg(544)), ] },
    // 516
    Message { name: "api.resource.v1.AllocationResult", special: Special::Plain, fields: &[one(1, "devices", Msg(525)), one(3, "nodeSelector", Msg(303)), one(5, "allocationTimestamp", Msg(728)), ] },
    // 517
    Message { name: "api.resource.v1.CapacityRequestPolicy", special: Special::Plain, fields: &[one(1, "default", Msg(711)), many(3, "validValues", Msg(711)), one(4, "validRange", Msg(518)), ] },
    // 518
    Message { name: "api.resource.v1.CapacityRequestPolicyRange", special: Special::Plain, fields: &[one(1, "min", Msg(711)), one(2, "max", Msg(711)), one(3, "step", Msg(711)), ] },
    // 519
    Message { name: "api.resource.v1.CapacityRequirements", special: Special::Plain, fields: &[one(1, "requests", MapMsg(711)), ] },
    // 520
    Message { name: "api.resource.v1.CelDeviceSelector", special: Special::Plain, fields: &[one(1, "expression", Str), ] },
    // 521
    Message { name: "api.resource.v1.Counter", special: Special::Plain, fields: &[one(1, "value", Msg(711)), ] },
    // 522
    Message { name: "api.resource.v1.CounterSet", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "counters", MapMsg(521)), ] },
    // 523
    Message { name: "api.resource.v1.Device", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "attributes", MapMsg(526)), one(3, "capacity", MapMsg(527)), many(4, "consumesCounters", Msg(536)), one(5, "nodeName", Str), one(6, "nodeSelector", Msg(303)), one(7, "allNodes", Bool), many(8, "taints", Msg(541)), one(9, "bindsToNode", Bool), many(10, "bindingConditions", Str), many(11, "bindingFailureConditions", Str), one(12, "allowMultipleAllocations", Bool), ] },
    // 524
    Message { name: "api.resource.v1.DeviceAllocationConfiguration", special: Special::Plain, fields: &[one(1, "source", Str), many(2, "requests", Str), one(3, "", Msg(534)), ] },
    // 525
    Message { name: "api.resource.v1.DeviceAllocationResult", special: Special::Plain, fields: &[many(1, "results", Msg(538)), many(2, "config", Msg(524)), ] },
    // 526
    Message { name: "api.resource.v1.DeviceAttribute", special: Special::Plain, fields: &[one(2, "int", I64), one(3, "bool", Bool), one(4, "string", Str), one(5, "version", Str), ] },
    // 527
    Message { name: "api.resource.v1.DeviceCapacity", special: Special::Plain, fields: &[one(1, "value", Msg(711)), one(2, "requestPolicy", Msg(517)), ] },
    // 528
    Message { name: "api.resource.v1.DeviceClaim", special: Special::Plain, fields: &[many(1, "requests", Msg(537)), many(2, "constraints", Msg(535)), many(3, "config", Msg(529)), ] },
    // 529
    Message { name: "api.resource.v1.DeviceClaimConfiguration", special: Special::Plain, fields: &[many(1, "requests", Str), one(2, "", Msg(534)), ] },
    // 530
    Message { name: "api.resource.v1.DeviceClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(533)), ] },
    // 531
    Message { name: "api.resource.v1.DeviceClassConfiguration", special: Special::Plain, fields: &[one(1, "", Msg(534)), ] },
    // 532
    Message { name: "api.resource.v1.DeviceClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(530)), ] },
    // 533
    Message { name: "api.resource.v1.DeviceClassSpec", special: Special::Plain, fields: &[many(1, "selectors", Msg(539)), many(2, "config", Msg(531)), one(4, "extendedResourceName", Str), ] },
    // 534
    Message { name: "api.resource.v1.DeviceConfiguration", special: Special::Plain, fields: &[one(1, "opaque", Msg(545)), ] },
    // 535
    Message { name: "api.resource.v1.DeviceConstraint", special: Special::Plain, fields: &[many(1, "requests", Str), one(2, "matchAttribute", Str), one(3, "distinctAttribute", Str), ] },
    // 536
    Message { name: "api.resource.v1.DeviceCounterConsumption", special: Special::Plain, fields: &[one(1, "counterSet", Str), one(2, "counters", MapMsg(521)), ] },
    // 537
    Message { name: "api.resource.v1.DeviceRequest", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "exactly", Msg(543)), many(3, "firstAvailable", Msg(540)), ] },
    // 538
    Message { name: "api.resource.v1.DeviceRequestAllocationResult", special: Special::Plain, fields: &[one(1, "request", Str), one(2, "driver", Str), one(3, "pool", Str), one(4, "device", Str), one(5, "adminAccess", Bool), many(6, "tolerations", Msg(542)), many(7, "bindingConditions", Str), many(8, "bindingFailureConditions", Str), one(9, "shareID", Str), one(10, "consumedCapacity", MapMsg(711)), ] },
    // 539
    Message { name: "api.resource.v1.DeviceSelector", special: Special::Plain, fields: &[one(1, "cel", Msg(520)), ] },
    // 540
    Message { name: "api.resource.v1.DeviceSubRequest", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "deviceClassName", Str), many(3, "selectors", Msg(539)), one(4, "allocationMode", Str), one(5, "count", I64), many(6, "tolerations", Msg(542)), one(7, "capacity", Msg(519)), ] },
    // 541
    Message { name: "api.resource.v1.DeviceTaint", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "value", Str), one(3, "effect", Str), one(4, "timeAdded", Msg(728)), ] },
    // 542
    Message { name: "api.resource.v1.DeviceToleration", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "operator", Str), one(3, "value", Str), one(4, "effect", Str), one(5, "tolerationSeconds", I64), ] },
    // 543
    Message { name: "api.resource.v1.ExactDeviceRequest", special: Special::Plain, fields: &[one(1, "deviceClassName", Str), many(2, "selectors", Msg(539)), one(3, "allocationMode", Str), one(4, "count", I64), one(5, "adminAccess", Bool), many(6, "tolerations", Msg(542)), one(7, "capacity", Msg(519)), ] },
    // 544
    Message { name: "api.resource.v1.NetworkDeviceData", special: Special::Plain, fields: &[one(1, "interfaceName", Str), many(2, "ips", Str), one(3, "hardwareAddress", Str), ] },
    // 545
    Message { name: "api.resource.v1.OpaqueDeviceConfiguration", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "parameters", Msg(730)), ] },
    // 546
    Message { name: "api.resource.v1.ResourceClaim", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(549)), one(3, "status", Msg(550)), ] },
    // 547
    Message { name: "api.resource.v1.ResourceClaimConsumerReference", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(3, "resource", Str), one(4, "name", Str), one(5, "uid", Str), ] },
    // 548
    Message { name: "api.resource.v1.ResourceClaimList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(546)), ] },
    // 549
    Message { name: "api.resource.v1.ResourceClaimSpec", special: Special::Plain, fields: &[one(1, "devices", Msg(528)), ] },
    // 550
    Message { name: "api.resource.v1.ResourceClaimStatus", special: Special::Plain, fields: &[one(1, "allocation", Msg(516)), many(2, "reservedFor", Msg(547)), many(4, "devices", Msg(515)), ] },
    // 551
    Message { name: "api.resource.v1.ResourceClaimTemplate", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(553)), ] },
    // 552
    Message { name: "api.resource.v1.ResourceClaimTemplateList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(551)), ] },
    // 553
    Message { name: "api.resource.v1.ResourceClaimTemplateSpec", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(549)), ] },
    // 554
    Message { name: "api.resource.v1.ResourcePool", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "generation", I64), one(3, "resourceSliceCount", I64), ] },
    // 555
    Message { name: "api.resource.v1.ResourceSlice", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(557)), ] },
    // 556
    Message { name: "api.resource.v1.ResourceSliceList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(555)), ] },
    // 557
    Message { name: "api.resource.v1.ResourceSliceSpec", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "pool", Msg(554)), one(3, "nodeName", Str), one(4, "nodeSelector", Msg(303)), one(5, "allNodes", Bool), many(6, "devices", Msg(523)), one(7, "perDeviceNodeSelection", Bool), many(8, "sharedCounters", Msg(522)), ] },
    // 558
    Message { name: "api.resource.v1alpha3.DeviceTaint", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "value", Str), one(3, "effect", Str), one(4, "timeAdded", Msg(728)), ] },
    // 559
    Message { name: "api.resource.v1alpha3.DeviceTaintRule", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(561)), one(3, "status", Msg(562)), ] },
    // 560
    Message { name: "api.resource.v1alpha3.DeviceTaintRuleList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(559)), ] },
    // 561
    Message { name: "api.resource.v1alpha3.DeviceTaintRuleSpec", special: Special::Plain, fields: &[one(1, "deviceSelector", Msg(563)), one(2, "taint", Msg(558)), ] },
    // 562
    Message { name: "api.resource.v1alpha3.DeviceTaintRuleStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(712)), ] },
    // 563
    Message { name: "api.resource.v1alpha3.DeviceTaintSelector", special: Special::Plain, fields: &[one(2, "driver", Str), one(3, "pool", Str), one(4, "device", Str), ] },
    // 564
    Message { name: "api.resource.v1beta1.AllocatedDeviceStatus", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "pool", Str), one(3, "device", Str), one(7, "shareID", Str), many(4, "conditions", Msg(712)), one(5, "data", Msg(730)), one(6, "networkData", Msg(593)), ] },
    // 565
    Message { name: "api.resource.v1beta1.AllocationResult", special: Special::Plain, fields: &[one(1, "devices", Msg(575)), one(3, "nodeSelector", Msg(303)), one(5, "allocationTimestamp", Msg(728)), ] },
    // 566
    Message { name: "api.resource.v1beta1.BasicDevice", special: Special::Plain, fields: &[one(1, "attributes", MapMsg(576)), one(2, "capacity", MapMsg(577)), many(3, "consumesCounters", Msg(586)), one(4, "nodeName", Str), one(5, "nodeSelector", Msg(303)), one(6, "allNodes", Bool), many(7, "taints", Msg(591)), one(8, "bindsToNode", Bool), many(9, "bindingConditions", Str), many(10, "bindingFailureConditions", Str), one(11, "allowMultipleAllocations", Bool), ] },
    // 567
    Message { name: "api.resource.v1beta1.CapacityRequestPolicy", special: Special::Plain, fields: &[one(1, "default", Msg(711)), many(3, "validValues", Msg(711)), one(4, "validRange", Msg(568)), ] },
    // 568
    Message { name: "api.resource.v1beta1.CapacityRequestPolicyRange", special: Special::Plain, fields: &[one(1, "min", Msg(711)), one(2, "max", Msg(711)), one(3, "step", Msg(711)), ] },
    // 569
    Message { name: "api.resource.v1beta1.CapacityRequirements", special: Special::Plain, fields: &[one(1, "requests", MapMsg(711)), ] },
    // 570
    Message { name: "api.resource.v1beta1.CelDeviceSelector", special: Special::Plain, fields: &[one(1, "expression", Str), ] },
    // 571
    Message { name: "api.resource.v1beta1.Counter", special: Special::Plain, fields: &[one(1, "value", Msg(711)), ] },
    // 572
    Message { name: "api.resource.v1beta1.CounterSet", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "counters", MapMsg(571)), ] },
    // 573
    Message { name: "api.resource.v1beta1.Device", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "basic", Msg(566)), ] },
    // 574
    Message { name: "api.resource.v1beta1.DeviceAllocationConfiguration", special: Special::Plain, fields: &[one(1, "source", Str), many(2, "requests", Str), one(3, "", Msg(584)), ] },
    // 575
    Message { name: "api.resource.v1beta1.DeviceAllocationResult", special: Special::Plain, fields: &[many(1, "results", Msg(588)), many(2, "config", Msg(574)), ] },
    // 576
    Message { name: "api.resource.v1beta1.DeviceAttribute", special: Special::Plain, fields: &[one(2, "int", I64), one(3, "bool", Bool), one(4, "string", Str), one(5, "version", Str), ] },
    // 577
    Message { name: "api.resource.v1beta1.DeviceCapacity", special: Special::Plain, fields: &[one(1, "value", Msg(711)), one(2, "requestPolicy", Msg(567)), ] },
    // 578
    Message { name: "api.resource.v1beta1.DeviceClaim", special: Special::Plain, fields: &[many(1, "requests", Msg(587)), many(2, "constraints", Msg(585)), many(3, "config", Msg(579)), ] },
    // 579
    Message { name: "api.resource.v1beta1.DeviceClaimConfiguration", special: Special::Plain, fields: &[many(1, "requests", Str), one(2, "", Msg(584)), ] },
    // 580
    Message { name: "api.resource.v1beta1.DeviceClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(583)), ] },
    // 581
    Message { name: "api.resource.v1beta1.DeviceClassConfiguration", special: Special::Plain, fields: &[one(1, "", Msg(584)), ] },
    // 582
    Message { name: "api.resource.v1beta1.DeviceClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(580)), ] },
    // 583
    Message { name: "api.resource.v1beta1.DeviceClassSpec", special: Special::Plain, fields: &[many(1, "selectors", Msg(589)), many(2, "config", Msg(581)), one(4, "extendedResourceName", Str), ] },
    // 584
    Message { name: "api.resource.v1beta1.DeviceConfiguration", special: Special::Plain, fields: &[one(1, "opaque", Msg(594)), ] },
    // 585
    Message { name: "api.resource.v1beta1.DeviceConstraint", special: Special::Plain, fields: &[many(1, "requests", Str), one(2, "matchAttribute", Str), one(3, "distinctAttribute", Str), ] },
    // 586
    Message { name: "api.resource.v1beta1.DeviceCounterConsumption", special: Special::Plain, fields: &[one(1, "counterSet", Str), one(2, "counters", MapMsg(571)), ] },
    // 587
    Message { name: "api.resource.v1beta1.DeviceRequest", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "deviceClassName", Str), many(3, "selectors", Msg(589)), one(4, "allocationMode", Str), one(5, "count", I64), one(6, "adminAccess", Bool), many(7, "firstAvailable", Msg(590)), many(8, "tolerations", Msg(592)), one(9, "capacity", Msg(569)), ] },
    // 588
    Message { name: "api.resource.v1beta1.DeviceRequestAllocationResult", special: Special::Plain, fields: &[one(1, "request", Str), one(2, "driver", Str), one(3, "pool", Str), one(4, "device", Str), one(5, "adminAccess", Bool), many(6, "tolerations", Msg(592)), many(7, "bindingConditions", Str), many(8, "bindingFailureConditions", Str), one(9, "shareID", Str), one(10, "consumedCapacity", MapMsg(711)), ] },
    // 589
    Message { name: "api.resource.v1beta1.DeviceSelector", special: Special::Plain, fields: &[one(1, "cel", Msg(570)), ] },
    // 590
    Message { name: "api.resource.v1beta1.DeviceSubRequest", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "deviceClassName", Str), many(3, "selectors", Msg(589)), one(4, "allocationMode", Str), one(5, "count", I64), many(7, "tolerations", Msg(592)), one(8, "capacity", Msg(569)), ] },
    // 591
    Message { name: "api.resource.v1beta1.DeviceTaint", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "value", Str), one(3, "effect", Str), one(4, "timeAdded", Msg(728)), ] },
    // 592
    Message { name: "api.resource.v1beta1.DeviceToleration", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "operator", Str), one(3, "value", Str), one(4, "effect", Str), one(5, "tolerationSeconds", I64), ] },
    // 593
    Message { name: "api.resource.v1beta1.NetworkDeviceData", special: Special::Plain, fields: &[one(1, "interfaceName", Str), many(2, "ips", Str), one(3, "hardwareAddress", Str), ] },
    // 594
    Message { name: "api.resource.v1beta1.OpaqueDeviceConfiguration", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "parameters", Msg(730)), ] },
    // 595
    Message { name: "api.resource.v1beta1.ResourceClaim", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(598)), one(3, "status", Msg(599)), ] },
    // 596
    Message { name: "api.resource.v1beta1.ResourceClaimConsumerReference", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(3, "resource", Str), one(4, "name", Str), one(5, "uid", Str), ] },
    // 597
    Message { name: "api.resource.v1beta1.ResourceClaimList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(595)), ] },
    // 598
    Message { name: "api.resource.v1beta1.ResourceClaimSpec", special: Special::Plain, fields: &[one(1, "devices", Msg(578)), ] },
    // 599
    Message { name: "api.resource.v1beta1.ResourceClaimStatus", special: Special::Plain, fields: &[one(1, "allocation", Msg(565)), many(2, "reservedFor", Msg(596)), many(4, "devices", Msg(564)), ] },
    // 600
    Message { name: "api.resource.v1beta1.ResourceClaimTemplate", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(602)), ] },
    // 601
    Message { name: "api.resource.v1beta1.ResourceClaimTemplateList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(600)), ] },
    // 602
    Message { name: "api.resource.v1beta1.ResourceClaimTemplateSpec", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(598)), ] },
    // 603
    Message { name: "api.resource.v1beta1.ResourcePool", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "generation", I64), one(3, "resourceSliceCount", I64), ] },
    // 604
    Message { name: "api.resource.v1beta1.ResourceSlice", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(606)), ] },
    // 605
    Message { name: "api.resource.v1beta1.ResourceSliceList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(604)), ] },
    // 606
    Message { name: "api.resource.v1beta1.ResourceSliceSpec", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "pool", Msg(603)), one(3, "nodeName", Str), one(4, "nodeSelector", Msg(303)), one(5, "allNodes", Bool), many(6, "devices", Msg(573)), one(7, "perDeviceNodeSelection", Bool), many(8, "sharedCounters", Msg(572)), ] },
    // 607
    Message { name: "api.resource.v1beta2.AllocatedDeviceStatus", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "pool", Str), one(3, "device", Str), one(7, "shareID", Str), many(4, "conditions", Msg(712)), one(5, "data", Msg(730)), one(6, "networkData", Msg(636)), ] },
    // 608
    Message { name: "api.resource.v1beta2.AllocationResult", special: Special::Plain, fields: &[one(1, "devices", Msg(617)), one(3, "nodeSelector", Msg(303)), one(5, "allocationTimestamp", Msg(728)), ] },
    // 609
    Message { name: "api.resource.v1beta2.CapacityRequestPolicy", special: Special::Plain, fields: &[one(1, "default", Msg(711)), many(3, "validValues", Msg(711)), one(4, "validRange", Msg(610)), ] },
    // 610
    Message { name: "api.resource.v1beta2.CapacityRequestPolicyRange", special: Special::Plain, fields: &[one(1, "min", Msg(711)), one(2, "max", Msg(711)), one(3, "step", Msg(711)), ] },
    // 611
    Message { name: "api.resource.v1beta2.CapacityRequirements", special: Special::Plain, fields: &[one(1, "requests", MapMsg(711)), ] },
    // 612
    Message { name: "api.resource.v1beta2.CelDeviceSelector", special: Special::Plain, fields: &[one(1, "expression", Str), ] },
    // 613
    Message { name: "api.resource.v1beta2.Counter", special: Special::Plain, fields: &[one(1, "value", Msg(711)), ] },
    // 614
    Message { name: "api.resource.v1beta2.CounterSet", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "counters", MapMsg(613)), ] },
    // 615
    Message { name: "api.resource.v1beta2.Device", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "attributes", MapMsg(618)), one(3, "capacity", MapMsg(619)), many(4, "consumesCounters", Msg(628)), one(5, "nodeName", Str), one(6, "nodeSelector", Msg(303)), one(7, "allNodes", Bool), many(8, "taints", Msg(633)), one(9, "bindsToNode", Bool), many(10, "bindingConditions", Str), many(11, "bindingFailureConditions", Str), one(12, "allowMultipleAllocations", Bool), ] },
    // 616
    Message { name: "api.resource.v1beta2.DeviceAllocationConfiguration", special: Special::Plain, fields: &[one(1, "source", Str), many(2, "requests", Str), one(3, "", Msg(626)), ] },
    // 617
    Message { name: "api.resource.v1beta2.DeviceAllocationResult", special: Special::Plain, fields: &[many(1, "results", Msg(630)), many(2, "config", Msg(616)), ] },
    // 618
    Message { name: "api.resource.v1beta2.DeviceAttribute", special: Special::Plain, fields: &[one(2, "int", I64), one(3, "bool", Bool), one(4, "string", Str), one(5, "version", Str), ] },
    // 619
    Message { name: "api.resource.v1beta2.DeviceCapacity", special: Special::Plain, fields: &[one(1, "value", Msg(711)), one(2, "requestPolicy", Msg(609)), ] },
    // 620
    Message { name: "api.resource.v1beta2.DeviceClaim", special: Special::Plain, fields: &[many(1, "requests", Msg(629)), many(2, "constraints", Msg(627)), many(3, "config", Msg(621)), ] },
    // 621
    Message { name: "api.resource.v1beta2.DeviceClaimConfiguration", special: Special::Plain, fields: &[many(1, "requests", Str), one(2, "", Msg(626)), ] },
    // 622
    Message { name: "api.resource.v1beta2.DeviceClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(625)), ] },
    // 623
    Message { name: "api.resource.v1beta2.DeviceClassConfiguration", special: Special::Plain, fields: &[one(1, "", Msg(626)), ] },
    // 624
    Message { name: "api.resource.v1beta2.DeviceClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(622)), ] },
    // 625
    Message { name: "api.resource.v1beta2.DeviceClassSpec", special: Special::Plain, fields: &[many(1, "selectors", Msg(631)), many(2, "config", Msg(623)), one(4, "extendedResourceName", Str), ] },
    // 626
    Message { name: "api.resource.v1beta2.DeviceConfiguration", special: Special::Plain, fields: &[one(1, "opaque", Msg(637)), ] },
    // 627
    Message { name: "api.resource.v1beta2.DeviceConstraint", special: Special::Plain, fields: &[many(1, "requests", Str), one(2, "matchAttribute", Str), one(3, "distinctAttribute", Str), ] },
    // 628
    Message { name: "api.resource.v1beta2.DeviceCounterConsumption", special: Special::Plain, fields: &[one(1, "counterSet", Str), one(2, "counters", MapMsg(613)), ] },
    // 629
    Message { name: "api.resource.v1beta2.DeviceRequest", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "exactly", Msg(635)), many(3, "firstAvailable", Msg(632)), ] },
    // 630
    Message { name: "api.resource.v1beta2.DeviceRequestAllocationResult", special: Special::Plain, fields: &[one(1, "request", Str), one(2, "driver", Str), one(3, "pool", Str), one(4, "device", Str), one(5, "adminAccess", Bool), many(6, "tolerations", Msg(634)), many(7, "bindingConditions", Str), many(8, "bindingFailureConditions", Str), one(9, "shareID", Str), one(10, "consumedCapacity", MapMsg(711)), ] },
    // 631
    Message { name: "api.resource.v1beta2.DeviceSelector", special: Special::Plain, fields: &[one(1, "cel", Msg(612)), ] },
    // 632
    Message { name: "api.resource.v1beta2.DeviceSubRequest", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "deviceClassName", Str), many(3, "selectors", Msg(631)), one(4, "allocationMode", Str), one(5, "count", I64), many(6, "tolerations", Msg(634)), one(7, "capacity", Msg(611)), ] },
    // 633
    Message { name: "api.resource.v1beta2.DeviceTaint", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "value", Str), one(3, "effect", Str), one(4, "timeAdded", Msg(728)), ] },
    // 634
    Message { name: "api.resource.v1beta2.DeviceToleration", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "operator", Str), one(3, "value", Str), one(4, "effect", Str), one(5, "tolerationSeconds", I64), ] },
    // 635
    Message { name: "api.resource.v1beta2.ExactDeviceRequest", special: Special::Plain, fields: &[one(1, "deviceClassName", Str), many(2, "selectors", Msg(631)), one(3, "allocationMode", Str), one(4, "count", I64), one(5, "adminAccess", Bool), many(6, "tolerations", Msg(634)), one(7, "capacity", Msg(611)), ] },
    // 636
    Message { name: "api.resource.v1beta2.NetworkDeviceData", special: Special::Plain, fields: &[one(1, "interfaceName", Str), many(2, "ips", Str), one(3, "hardwareAddress", Str), ] },
    // 637
    Message { name: "api.resource.v1beta2.OpaqueDeviceConfiguration", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "parameters", Msg(730)), ] },
    // 638
    Message { name: "api.resource.v1beta2.ResourceClaim", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(641)), one(3, "status", Msg(642)), ] },
    // 639
    Message { name: "api.resource.v1beta2.ResourceClaimConsumerReference", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(3, "resource", Str), one(4, "name", Str), one(5, "uid", Str), ] },
    // 640
    Message { name: "api.resource.v1beta2.ResourceClaimList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(638)), ] },
    // 641
    Message { name: "api.resource.v1beta2.ResourceClaimSpec", special: Special::Plain, fields: &[one(1, "devices", Msg(620)), ] },
    // 642
    Message { name: "api.resource.v1beta2.ResourceClaimStatus", special: Special::Plain, fields: &[one(1, "allocation", Msg(608)), many(2, "reservedFor", Msg(639)), many(4, "devices", Msg(607)), ] },
    // 643
    Message { name: "api.resource.v1beta2.ResourceClaimTemplate", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(645)), ] },
    // 644
    Message { name: "api.resource.v1beta2.ResourceClaimTemplateList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(643)), ] },
    // 645
    Message { name: "api.resource.v1beta2.ResourceClaimTemplateSpec", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(641)), ] },
    // 646
    Message { name: "api.resource.v1beta2.ResourcePool", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "generation", I64), one(3, "resourceSliceCount", I64), ] },
    // 647
    Message { name: "api.resource.v1beta2.ResourceSlice", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(649)), ] },
    // 648
    Message { name: "api.resource.v1beta2.ResourceSliceList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(647)), ] },
    // 649
    Message { name: "api.resource.v1beta2.ResourceSliceSpec", special: Special::Plain, fields: &[one(1, "driver", Str), one(2, "pool", Msg(646)), one(3, "nodeName", Str), one(4, "nodeSelector", Msg(303)), one(5, "allNodes", Bool), many(6, "devices", Msg(615)), one(7, "perDeviceNodeSelection", Bool), many(8, "sharedCounters", Msg(614)), ] },
    // 650
    Message { name: "api.scheduling.v1.PriorityClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "value", I32), one(3, "globalDefault", Bool), one(4, "description", Str), one(5, "preemptionPolicy", Str), ] },
    // 651
    Message { name: "api.scheduling.v1.PriorityClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(650)), ] },
    // 652
    Message { name: "api.scheduling.v1alpha1.BasicSchedulingPolicy", special: Special::Plain, fields: &[] },
    // 653
    Message { name: "api.scheduling.v1alpha1.GangSchedulingPolicy", special: Special::Plain, fields: &[one(1, "minCount", I32), ] },
    // 654
    Message { name: "api.scheduling.v1alpha1.PodGroup", special: Special::Plain, fields: &[one(1, "name", Str), one(3, "policy", Msg(655)), ] },
    // 655
    Message { name: "api.scheduling.v1alpha1.PodGroupPolicy", special: Special::Plain, fields: &[one(2, "basic", Msg(652)), one(3, "gang", Msg(653)), ] },
    // 656
    Message { name: "api.scheduling.v1alpha1.TypedLocalObjectReference", special: Special::Plain, fields: &[one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str), ] },
    // 657
    Message { name: "api.scheduling.v1alpha1.Workload", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(659)), ] },
    // 658
    Message { name: "api.scheduling.v1alpha1.WorkloadList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(657)), ] },
    // 659
    Message { name: "api.scheduling.v1alpha1.WorkloadSpec", special: Special::Plain, fields: &[one(1, "controllerRef", Msg(656)), many(2, "podGroups", Msg(654)), ] },
    // 660
    Message { name: "api.storage.v1.CSIDriver", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(662)), ] },
    // 661
    Message { name: "api.storage.v1.CSIDriverList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(660)), ] },
    // 662
    Message { name: "api.storage.v1.CSIDriverSpec", special: Special::Plain, fields: &[one(1, "attachRequired", Bool), one(2, "podInfoOnMount", Bool), many(3, "volumeLifecycleModes", Str), one(4, "storageCapacity", Bool), one(5, "fsGroupPolicy", Str), many(6, "tokenRequests", Msg(671)), one(7, "requiresRepublish", Bool), one(8, "seLinuxMount", Bool), one(9, "nodeAllocatableUpdatePeriodSeconds", I64), one(10, "serviceAccountTokenInSecrets", Bool), ] },
    // 663
    Message { name: "api.storage.v1.CSINode", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(666)), ] },
    // 664
    Message { name: "api.storage.v1.CSINodeDriver", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "nodeID", Str), many(3, "topologyKeys", Str), one(4, "allocatable", Msg(680)), ] },
    // 665
    Message { name: "api.storage.v1.CSINodeList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(663)), ] },
    // 666
    Message { name: "api.storage.v1.CSINodeSpec", special: Special::Plain, fields: &[many(1, "drivers", Msg(664)), ] },
    // 667
    Message { name: "api.storage.v1.CSIStorageCapacity", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "nodeTopology", Msg(717)), one(3, "storageClassName", Str), one(4, "capacity", Msg(711)), one(5, "maximumVolumeSize", Msg(711)), ] },
    // 668
    Message { name: "api.storage.v1.CSIStorageCapacityList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(667)), ] },
    // 669
    Message { name: "api.storage.v1.StorageClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "provisioner", Str), one(3, "parameters", MapStr), one(4, "reclaimPolicy", Str), many(5, "mountOptions", Str), one(6, "allowVolumeExpansion", Bool), one(7, "volumeBindingMode", Str), many(8, "allowedTopologies", Msg(401)), ] },
    // 670
    Message { name: "api.storage.v1.StorageClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(669)), ] },
    // 671
    Message { name: "api.storage.v1.TokenRequest", special: Special::Plain, fields: &[one(1, "audience", Str), one(2, "expirationSeconds", I64), ] },
    // 672
    Message { name: "api.storage.v1.VolumeAttachment", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(675)), one(3, "status", Msg(676)), ] },
    // 673
    Message { name: "api.storage.v1.VolumeAttachmentList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(672)), ] },
    // 674
    Message { name: "api.storage.v1.VolumeAttachmentSource", special: Special::Plain, fields: &[one(1, "persistentVolumeName", Str), one(2, "inlineVolumeSpec", Msg(322)), ] },
    // 675
    Message { name: "api.storage.v1.VolumeAttachmentSpec", special: Special::Plain, fields: &[one(1, "attacher", Str), one(2, "source", Msg(674)), one(3, "nodeName", Str), ] },
    // 676
    Message { name: "api.storage.v1.VolumeAttachmentStatus", special: Special::Plain, fields: &[one(1, "attached", Bool), one(2, "attachmentMetadata", MapStr), one(3, "attachError", Msg(679)), one(4, "detachError", Msg(679)), ] },
    // 677
    Message { name: "api.storage.v1.VolumeAttributesClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "driverName", Str), one(3, "parameters", MapStr), ] },
    // 678
    Message { name: "api.storage.v1.VolumeAttributesClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(677)), ] },
    // 679
    Message { name: "api.storage.v1.VolumeError", special: Special::Plain, fields: &[one(1, "time", Msg(728)), one(2, "message", Str), one(3, "errorCode", I32), ] },
    // 680
    Message { name: "api.storage.v1.VolumeNodeResources", special: Special::Plain, fields: &[one(1, "count", I32), ] },
    // 681
    Message { name: "api.storage.v1beta1.VolumeAttributesClass", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "driverName", Str), one(3, "parameters", MapStr), ] },
    // 682
    Message { name: "api.storage.v1beta1.VolumeAttributesClassList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(681)), ] },
    // 683
    Message { name: "api.storagemigration.v1beta1.StorageVersionMigration", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(685)), one(3, "status", Msg(686)), ] },
    // 684
    Message { name: "api.storagemigration.v1beta1.StorageVersionMigrationList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(683)), ] },
    // 685
    Message { name: "api.storagemigration.v1beta1.StorageVersionMigrationSpec", special: Special::Plain, fields: &[one(1, "resource", Msg(716)), ] },
    // 686
    Message { name: "api.storagemigration.v1beta1.StorageVersionMigrationStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(712)), one(2, "resourceVersion", Str), ] },
    // 687
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceColumnDefinition", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "type", Str), one(3, "format", Str), one(4, "description", Str), one(5, "priority", I32), one(6, "jsonPath", Str), ] },
    // 688
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceConversion", special: Special::Plain, fields: &[one(1, "strategy", Str), one(2, "webhook", Msg(710)), ] },
    // 689
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(693)), one(3, "status", Msg(694)), ] },
    // 690
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), one(6, "observedGeneration", I64), ] },
    // 691
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(689)), ] },
    // 692
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionNames", special: Special::Plain, fields: &[one(1, "plural", Str), one(2, "singular", Str), many(3, "shortNames", Str), one(4, "kind", Str), one(5, "listKind", Str), many(6, "categories", Str), ] },
    // 693
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec", special: Special::Plain, fields: &[one(1, "group", Str), one(3, "names", Msg(692)), one(4, "scope", Str), many(7, "versions", Msg(695)), one(9, "conversion", Msg(688)), one(10, "preserveUnknownFields", Bool), ] },
    // 694
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(690)), one(2, "acceptedNames", Msg(692)), many(3, "storedVersions", Str), one(4, "observedGeneration", I64), ] },
    // 695
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "served", Bool), one(3, "storage", Bool), one(7, "deprecated", Bool), one(8, "deprecationWarning", Str), one(4, "schema", Msg(699)), one(5, "subresources", Msg(698)), many(6, "additionalPrinterColumns", Msg(687)), many(9, "selectableFields", Msg(706)), ] },
    // 696
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceSubresourceScale", special: Special::Plain, fields: &[one(1, "specReplicasPath", Str), one(2, "statusReplicasPath", Str), one(3, "labelSelectorPath", Str), ] },
    // 697
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceSubresourceStatus", special: Special::Plain, fields: &[] },
    // 698
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceSubresources", special: Special::Plain, fields: &[one(1, "status", Msg(697)), one(2, "scale", Msg(696)), ] },
    // 699
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceValidation", special: Special::Plain, fields: &[one(1, "openAPIV3Schema", Msg(702)), ] },
    // 700
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.ExternalDocumentation", special: Special::Plain, fields: &[one(1, "description", Str), one(2, "url", Str), ] },
    // 701
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json", special: Special::RawJson, fields: &[one(1, "raw", Bytes), ] },
    // 702
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps", special: Special::Plain, fields: &[one(1, "id", Str), one(2, "$schema", Str), one(3, "$ref", Str), one(4, "description", Str), one(5, "type", Str), one(6, "format", Str), one(7, "title", Str), one(8, "default", Msg(701)), one(9, "maximum", F64), one(10, "exclusiveMaximum", Bool), one(11, "minimum", F64), one(12, "exclusiveMinimum", Bool), one(13, "maxLength", I64), one(14, "minLength", I64), one(15, "pattern", Str), one(16, "maxItems", I64), one(17, "minItems", I64), one(18, "uniqueItems", Bool), one(19, "multipleOf", F64), many(20, "enum", Msg(701)), one(21, "maxProperties", I64), one(22, "minProperties", I64), many(23, "required", Str), one(24, "items", Msg(703)), many(25, "allOf", Msg(702)), many(26, "oneOf", Msg(702)), many(27, "anyOf", Msg(702)), one(28, "not", Msg(702)), one(29, "properties", MapMsg(702)), one(30, "additionalProperties", Msg(704)), one(31, "patternProperties", MapMsg(702)), one(32, "dependencies", MapMsg(705)), one(33, "additionalItems", Msg(704)), one(34, "definitions", MapMsg(702)), one(35, "externalDocs", Msg(700)), one(36, "example", Msg(701)), one(37, "nullable", Bool), one(38, "x-kubernetes-preserve-unknown-fields", Bool), one(39, "x-kubernetes-embedded-resource", Bool), one(40, "x-kubernetes-int-or-string", Bool), many(41, "x-kubernetes-list-map-keys", Str), one(42, "x-kubernetes-list-type", Str), one(43, "x-kubernetes-map-type", Str), many(44, "x-kubernetes-validations", Msg(708)), ] },
    // 703
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray", special: Special::PropsOrArray, fields: &[one(1, "$schema", Msg(702)), many(2, "jSonSchemas", Msg(702)), ] },
    // 704
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool", special: Special::PropsOrBool, fields: &[one(1, "allows", Bool), one(2, "$schema", Msg(702)), ] },
    // 705
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray", special: Special::PropsOrStringArray, fields: &[one(1, "$schema", Msg(702)), many(2, "property", Str), ] },
    // 706
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.SelectableField", special: Special::Plain, fields: &[one(1, "jsonPath", Str), ] },
    // 707
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.ServiceReference", special: Special::Plain, fields: &[one(1, "namespace", Str), one(2, "name", Str), one(3, "path", Str), one(4, "port", I32), ] },
    // 708
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.ValidationRule", special: Special::Plain, fields: &[one(1, "rule", Str), one(2, "message", Str), one(3, "messageExpression", Str), one(4, "reason", Str), one(5, "fieldPath", Str), one(6, "optionalOldSelf", Bool), ] },
    // 709
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.WebhookClientConfig", special: Special::Plain, fields: &[one(3, "url", Str), one(1, "service", Msg(707)), one(2, "caBundle", Bytes), ] },
    // 710
    Message { name: "apiextensions_apiserver.pkg.apis.apiextensions.v1.WebhookConversion", special: Special::Plain, fields: &[one(2, "clientConfig", Msg(709)), many(3, "conversionReviewVersions", Str), ] },
    // 711
    Message { name: "apimachinery.pkg.api.resource.Quantity", special: Special::Quantity, fields: &[one(1, "string", Str), ] },
    // 712
    Message { name: "apimachinery.pkg.apis.meta.v1.Condition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "observedGeneration", I64), one(4, "lastTransitionTime", Msg(728)), one(5, "reason", Str), one(6, "message", Str), ] },
    // 713
    Message { name: "apimachinery.pkg.apis.meta.v1.DeleteOptions", special: Special::Plain, fields: &[one(1, "gracePeriodSeconds", I64), one(2, "preconditions", Msg(724)), one(3, "orphanDependents", Bool), one(4, "propagationPolicy", Str), many(5, "dryRun", Str), one(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool), ] },
    // 714
    Message { name: "apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "operator", Str), many(3, "values", Str), ] },
    // 715
    Message { name: "apimachinery.pkg.apis.meta.v1.FieldsV1", special: Special::RawJson, fields: &[one(1, "raw", Bytes), ] },
    // 716
    Message { name: "apimachinery.pkg.apis.meta.v1.GroupResource", special: Special::Plain, fields: &[one(1, "group", Str), one(2, "resource", Str), ] },
    // 717
    Message { name: "apimachinery.pkg.apis.meta.v1.LabelSelector", special: Special::Plain, fields: &[one(1, "matchLabels", MapStr), many(2, "matchExpressions", Msg(718)), ] },
    // 718
    Message { name: "apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement", special: Special::Plain, fields: &[one(1, "key", Str), one(2, "operator", Str), many(3, "values", Str), ] },
    // 719
    Message { name: "apimachinery.pkg.apis.meta.v1.ListMeta", special: Special::Plain, fields: &[one(1, "selfLink", Str), one(2, "resourceVersion", Str), one(3, "continue", Str), one(4, "remainingItemCount", I64), ] },
    // 720
    Message { name: "apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry", special: Special::Plain, fields: &[one(1, "manager", Str), one(2, "operation", Str), one(3, "apiVersion", Str), one(4, "time", Msg(728)), one(6, "fieldsType", Str), one(7, "fieldsV1", Msg(715)), one(8, "subresource", Str), ] },
    // 721
    Message { name: "apimachinery.pkg.apis.meta.v1.MicroTime", special: Special::MicroTime, fields: &[one(1, "seconds", I64), one(2, "nanos", I32), ] },
    // 722
    Message { name: "apimachinery.pkg.apis.meta.v1.ObjectMeta", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "generateName", Str), one(3, "namespace", Str), one(4, "selfLink", Str), one(5, "uid", Str), one(6, "resourceVersion", Str), one(7, "generation", I64), one(8, "creationTimestamp", Msg(728)), one(9, "deletionTimestamp", Msg(728)), one(10, "deletionGracePeriodSeconds", I64), one(11, "labels", MapStr), one(12, "annotations", MapStr), many(13, "ownerReferences", Msg(723)), many(14, "finalizers", Str), many(17, "managedFields", Msg(720)), ] },
    // 723
    Message { name: "apimachinery.pkg.apis.meta.v1.OwnerReference", special: Special::Plain, fields: &[one(5, "apiVersion", Str), one(1, "kind", Str), one(3, "name", Str), one(4, "uid", Str), one(6, "controller", Bool), one(7, "blockOwnerDeletion", Bool), ] },
    // 724
    Message { name: "apimachinery.pkg.apis.meta.v1.Preconditions", special: Special::Plain, fields: &[one(1, "uid", Str), one(2, "resourceVersion", Str), ] },
    // 725
    Message { name: "apimachinery.pkg.apis.meta.v1.Status", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), one(2, "status", Str), one(3, "message", Str), one(4, "reason", Str), one(5, "details", Msg(727)), one(6, "code", I32), ] },
    // 726
    Message { name: "apimachinery.pkg.apis.meta.v1.StatusCause", special: Special::Plain, fields: &[one(1, "reason", Str), one(2, "message", Str), one(3, "field", Str), ] },
    // 727
    Message { name: "apimachinery.pkg.apis.meta.v1.StatusDetails", special: Special::Plain, fields: &[one(1, "name", Str), one(2, "group", Str), one(3, "kind", Str), one(6, "uid", Str), many(4, "causes", Msg(726)), one(5, "retryAfterSeconds", I32), ] },
    // 728
    Message { name: "apimachinery.pkg.apis.meta.v1.Time", special: Special::Time, fields: &[one(1, "seconds", I64), one(2, "nanos", I32), ] },
    // 729
    Message { name: "apimachinery.pkg.apis.meta.v1.WatchEvent", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "object", Msg(730)), ] },
    // 730
    Message { name: "apimachinery.pkg.runtime.RawExtension", special: Special::RawJson, fields: &[one(1, "raw", Bytes), ] },
    // 731
    Message { name: "apimachinery.pkg.util.intstr.IntOrString", special: Special::IntOrString, fields: &[one(1, "type", I64), one(2, "intVal", I32), one(3, "strVal", Str), ] },
    // 732
    Message { name: "kube_aggregator.pkg.apis.apiregistration.v1.APIService", special: Special::Plain, fields: &[one(1, "metadata", Msg(722)), one(2, "spec", Msg(735)), one(3, "status", Msg(736)), ] },
    // 733
    Message { name: "kube_aggregator.pkg.apis.apiregistration.v1.APIServiceCondition", special: Special::Plain, fields: &[one(1, "type", Str), one(2, "status", Str), one(3, "lastTransitionTime", Msg(728)), one(4, "reason", Str), one(5, "message", Str), ] },
    // 734
    Message { name: "kube_aggregator.pkg.apis.apiregistration.v1.APIServiceList", special: Special::Plain, fields: &[one(1, "metadata", Msg(719)), many(2, "items", Msg(732)), ] },
    // 735
    Message { name: "kube_aggregator.pkg.apis.apiregistration.v1.APIServiceSpec", special: Special::Plain, fields: &[one(1, "service", Msg(737)), one(2, "group", Str), one(3, "version", Str), one(4, "insecureSkipTLSVerify", Bool), one(5, "caBundle", Bytes), one(7, "groupPriorityMinimum", I32), one(8, "versionPriority", I32), ] },
    // 736
    Message { name: "kube_aggregator.pkg.apis.apiregistration.v1.APIServiceStatus", special: Special::Plain, fields: &[many(1, "conditions", Msg(733)), ] },
    // 737
    Message { name: "kube_aggregator.pkg.apis.apiregistration.v1.ServiceReference", special: Special::Plain, fields: &[one(1, "namespace", Str), one(2, "name", Str), one(3, "port", I32), ] },
];

pub(super) static KINDS: &[Kind] = &[
    Kind { api_version: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", message: 5, list: Some(6) },
    Kind { api_version: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicy", message: 14, list: Some(18) },
    Kind { api_version: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicyBinding", message: 15, list: Some(16) },
    Kind { api_version: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", message: 22, list: Some(23) },
    Kind { api_version: "admissionregistration.k8s.io/v1alpha1", kind: "MutatingAdmissionPolicy", message: 31, list: Some(35) },
    Kind { api_version: "admissionregistration.k8s.io/v1alpha1", kind: "MutatingAdmissionPolicyBinding", message: 32, list: Some(33) },
    Kind { api_version: "admissionregistration.k8s.io/v1beta1", kind: "MutatingAdmissionPolicy", message: 46, list: Some(50) },
    Kind { api_version: "admissionregistration.k8s.io/v1beta1", kind: "MutatingAdmissionPolicyBinding", message: 47, list: Some(48) },
    Kind { api_version: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", message: 689, list: Some(691) },
    Kind { api_version: "apiregistration.k8s.io/v1", kind: "APIService", message: 732, list: Some(734) },
    Kind { api_version: "apps/v1", kind: "ControllerRevision", message: 63, list: Some(64) },
    Kind { api_version: "apps/v1", kind: "DaemonSet", message: 65, list: Some(67) },
    Kind { api_version: "apps/v1", kind: "Deployment", message: 71, list: Some(73) },
    Kind { api_version: "apps/v1", kind: "ReplicaSet", message: 77, list: Some(79) },
    Kind { api_version: "apps/v1", kind: "StatefulSet", message: 85, list: Some(87) },
    Kind { api_version: "authentication.k8s.io/v1", kind: "SelfSubjectReview", message: 95, list: None },
    Kind { api_version: "authentication.k8s.io/v1", kind: "TokenRequest", message: 97, list: None },
    Kind { api_version: "authentication.k8s.io/v1", kind: "TokenReview", message: 100, list: None },
    Kind { api_version: "authorization.k8s.io/v1", kind: "LocalSubjectAccessReview", message: 107, list: None },
    Kind { api_version: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", message: 112, list: None },
    Kind { api_version: "authorization.k8s.io/v1", kind: "SelfSubjectRulesReview", message: 114, list: None },
    Kind { api_version: "authorization.k8s.io/v1", kind: "SubjectAccessReview", message: 116, list: None },
    Kind { api_version: "autoscaling/v1", kind: "HorizontalPodAutoscaler", message: 121, list: Some(122) },
    Kind { api_version: "autoscaling/v1", kind: "Scale", message: 125, list: None },
    Kind { api_version: "autoscaling/v2", kind: "HorizontalPodAutoscaler", message: 133, list: Some(136) },
    Kind { api_version: "batch/v1", kind: "CronJob", message: 152, list: Some(153) },
    Kind { api_version: "batch/v1", kind: "Job", message: 156, list: Some(158) },
    Kind { api_version: "certificates.k8s.io/v1", kind: "CertificateSigningRequest", message: 169, list: Some(171) },
    Kind { api_version: "certificates.k8s.io/v1alpha1", kind: "ClusterTrustBundle", message: 175, list: Some(176) },
    Kind { api_version: "certificates.k8s.io/v1beta1", kind: "ClusterTrustBundle", message: 178, list: Some(179) },
    Kind { api_version: "certificates.k8s.io/v1beta1", kind: "PodCertificateRequest", message: 181, list: Some(182) },
    Kind { api_version: "coordination.k8s.io/v1", kind: "Lease", message: 185, list: Some(186) },
    Kind { api_version: "coordination.k8s.io/v1alpha2", kind: "LeaseCandidate", message: 188, list: Some(189) },
    Kind { api_version: "coordination.k8s.io/v1beta1", kind: "LeaseCandidate", message: 191, list: Some(192) },
    Kind { api_version: "discovery.k8s.io/v1", kind: "EndpointSlice", message: 421, list: Some(422) },
    Kind { api_version: "events.k8s.io/v1", kind: "Event", message: 425, list: Some(426) },
    Kind { api_version: "flowcontrol.apiserver.k8s.io/v1", kind: "FlowSchema", message: 430, list: Some(432) },
    Kind { api_version: "flowcontrol.apiserver.k8s.io/v1", kind: "PriorityLevelConfiguration", message: 440, list: Some(442) },
    Kind { api_version: "internal.apiserver.k8s.io/v1alpha1", kind: "StorageVersion", message: 58, list: Some(60) },
    Kind { api_version: "networking.k8s.io/v1", kind: "IPAddress", message: 453, list: Some(454) },
    Kind { api_version: "networking.k8s.io/v1", kind: "Ingress", message: 456, list: Some(462) },
    Kind { api_version: "networking.k8s.io/v1", kind: "IngressClass", message: 458, list: Some(459) },
    Kind { api_version: "networking.k8s.io/v1", kind: "NetworkPolicy", message: 473, list: Some(476) },
    Kind { api_version: "networking.k8s.io/v1", kind: "ServiceCIDR", message: 482, list: Some(483) },
    Kind { api_version: "networking.k8s.io/v1beta1", kind: "IPAddress", message: 486, list: Some(487) },
    Kind { api_version: "networking.k8s.io/v1beta1", kind: "ServiceCIDR", message: 490, list: Some(491) },
    Kind { api_version: "node.k8s.io/v1", kind: "RuntimeClass", message: 495, list: Some(496) },
    Kind { api_version: "policy/v1", kind: "Eviction", message: 498, list: None },
    Kind { api_version: "policy/v1", kind: "PodDisruptionBudget", message: 499, list: Some(500) },
    Kind { api_version: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", message: 504, list: Some(507) },
    Kind { api_version: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", message: 505, list: Some(506) },
    Kind { api_version: "rbac.authorization.k8s.io/v1", kind: "Role", message: 509, list: Some(512) },
    Kind { api_version: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", message: 510, list: Some(511) },
    Kind { api_version: "resource.k8s.io/v1", kind: "DeviceClass", message: 530, list: Some(532) },
    Kind { api_version: "resource.k8s.io/v1", kind: "ResourceClaim", message: 546, list: Some(548) },
    Kind { api_version: "resource.k8s.io/v1", kind: "ResourceClaimTemplate", message: 551, list: Some(552) },
    Kind { api_version: "resource.k8s.io/v1", kind: "ResourceSlice", message: 555, list: Some(556) },
    Kind { api_version: "resource.k8s.io/v1alpha3", kind: "DeviceTaintRule", message: 559, list: Some(560) },
    Kind { api_version: "resource.k8s.io/v1beta1", kind: "DeviceClass", message: 580, list: Some(582) },
    Kind { api_version: "resource.k8s.io/v1beta1", kind: "ResourceClaim", message: 595, list: Some(597) },
    Kind { api_version: "resource.k8s.io/v1beta1", kind: "ResourceClaimTemplate", message: 600, list: Some(601) },
    Kind { api_version: "resource.k8s.io/v1beta1", kind: "ResourceSlice", message: 604, list: Some(605) },
    Kind { api_version: "resource.k8s.io/v1beta2", kind: "DeviceClass", message: 622, list: Some(624) },
    Kind { api_version: "resource.k8s.io/v1beta2", kind: "ResourceClaim", message: 638, list: Some(640) },
    Kind { api_version: "resource.k8s.io/v1beta2", kind: "ResourceClaimTemplate", message: 643, list: Some(644) },
    Kind { api_version: "resource.k8s.io/v1beta2", kind: "ResourceSlice", message: 647, list: Some(648) },
    Kind { api_version: "scheduling.k8s.io/v1", kind: "PriorityClass", message: 650, list: Some(651) },
    Kind { api_version: "scheduling.k8s.io/v1alpha1", kind: "Workload", message: 657, list: Some(658) },
    Kind { api_version: "storage.k8s.io/v1", kind: "CSIDriver", message: 660, list: Some(661) },
    Kind { api_version: "storage.k8s.io/v1", kind: "CSINode", message: 663, list: Some(665) },
    Kind { api_version: "storage.k8s.io/v1", kind: "CSIStorageCapacity", message: 667, list: Some(668) },
    Kind { api_version: "storage.k8s.io/v1", kind: "StorageClass", message: 669, list: Some(670) },
    Kind { api_version: "storage.k8s.io/v1", kind: "VolumeAttachment", message: 672, list: Some(673) },
    Kind { api_version: "storage.k8s.io/v1", kind: "VolumeAttributesClass", message: 677, list: Some(678) },
    Kind { api_version: "storage.k8s.io/v1beta1", kind: "VolumeAttributesClass", message: 681, list: Some(682) },
    Kind { api_version: "storagemigration.k8s.io/v1beta1", kind: "StorageVersionMigration", message: 683, list: Some(684) },
    Kind { api_version: "v1", kind: "Binding", message: 201, list: None },
    Kind { api_version: "v1", kind: "ComponentStatus", message: 212, list: Some(213) },
    Kind { api_version: "v1", kind: "ConfigMap", message: 214, list: Some(217) },
    Kind { api_version: "v1", kind: "DeleteOptions", message: 713, list: None },
    Kind { api_version: "v1", kind: "Endpoints", message: 242, list: Some(243) },
    Kind { api_version: "v1", kind: "Event", message: 250, list: Some(251) },
    Kind { api_version: "v1", kind: "LimitRange", message: 276, list: Some(278) },
    Kind { api_version: "v1", kind: "Namespace", message: 286, list: Some(288) },
    Kind { api_version: "v1", kind: "Node", message: 292, list: Some(300) },
    Kind { api_version: "v1", kind: "PersistentVolume", message: 312, list: Some(320) },
    Kind { api_version: "v1", kind: "PersistentVolumeClaim", message: 313, list: Some(315) },
    Kind { api_version: "v1", kind: "Pod", message: 325, list: Some(335) },
    Kind { api_version: "v1", kind: "PodTemplate", message: 344, list: Some(345) },
    Kind { api_version: "v1", kind: "ReplicationController", message: 356, list: Some(358) },
    Kind { api_version: "v1", kind: "ResourceQuota", message: 364, list: Some(365) },
    Kind { api_version: "v1", kind: "Secret", message: 376, list: Some(379) },
    Kind { api_version: "v1", kind: "Service", message: 384, list: Some(388) },
    Kind { api_version: "v1", kind: "ServiceAccount", message: 385, list: Some(386) },
    Kind { api_version: "v1", kind: "Status", message: 725, list: None },
    Kind { api_version: "v1", kind: "WatchEvent", message: 729, list: None },
];
