//! Whether an eviction (`pods/NAME/eviction`) may delete its Pod, as kube-apiserver decides it
//! against the Pod's PodDisruptionBudget. kube-apiserver reads the budget's status, which the
//! disruption controller keeps current; an embedded cluster has no such controller, so a
//! budget whose status was not written for its current generation is worked out here from the
//! Pods it selects (a Pod is healthy when its `Ready` condition is `True`). Pure.

use serde_json::{Value, json};

use super::selectors::{LabelSelector, labels_of};

/// A budget as an eviction weighs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The PodDisruptionBudget's name.
    pub name: String,
    /// How many more Pods may be evicted now.
    pub disruptions_allowed: i64,
    /// How many of the Pods it selects are healthy (ready).
    pub current_healthy: i64,
    /// How many selected Pods must stay healthy.
    pub desired_healthy: i64,
    /// Read from the status a controller wrote (which an eviction then counts down), rather
    /// than worked out from the Pods.
    pub from_status: bool,
    /// `unhealthyPodEvictionPolicy: AlwaysAllow`.
    pub always_allow_unhealthy: bool,
}

/// What an eviction does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Delete the Pod; no budget is affected.
    Delete,
    /// Delete the Pod and count it against the budget's stored status.
    Disrupt,
    /// Refuse (429): the budget allows no disruption now; the cause's message.
    Refuse(String),
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// Pods no budget protects: finished, not yet running (no phase: no kubelet ever ran it), or
/// already being deleted.
pub fn ignores_budgets(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending" | "") || is_deleting(pod)
}

/// Whether the Pod's `Ready` condition is `True`: it counts as healthy for budgets.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Whether budget `pdb` covers `pod` (a budget without a selector covers nothing; an empty
/// one every Pod of its namespace).
pub fn selects(pdb: &Value, pod: &Value) -> bool {
    match pdb.pointer("/spec/selector") {
        None | Some(Value::Null) => false,
        Some(s) => LabelSelector::from_object(s).matches(&labels_of(pod)),
    }
}

/// `value` (an integer or a percentage) of `total`, percentages rounded up.
fn scaled(value: &Value, total: i64) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let percent: i64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((percent * total + 99) / 100)
}

/// The budget `pdb` sets, given the Pods of its namespace.
pub fn budget(pdb: &Value, pods: &[Value]) -> Budget {
    let name = pdb
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let always_allow_unhealthy = pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
    let status = &pdb["status"];
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    let int = |k: &str| status[k].as_i64().unwrap_or(0);
    if status["observedGeneration"]
        .as_i64()
        .is_some_and(|g| g >= generation)
    {
        return Budget {
            name,
            disruptions_allowed: int("disruptionsAllowed"),
            current_healthy: int("currentHealthy"),
            desired_healthy: int("desiredHealthy"),
            from_status: true,
            always_allow_unhealthy,
        };
    }
    let covered: Vec<&Value> = pods
        .iter()
        .filter(|p| selects(pdb, p) && !matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    let expected = covered.len() as i64;
    let healthy = covered
        .iter()
        .filter(|p| is_ready(p) && !is_deleting(p))
        .count() as i64;
    let spec = &pdb["spec"];
    let desired = if let Some(m) = spec.get("maxUnavailable").filter(|v| !v.is_null()) {
        (expected - scaled(m, expected).unwrap_or(0)).max(0)
    } else if let Some(m) = spec.get("minAvailable").filter(|v| !v.is_null()) {
        scaled(m, expected).unwrap_or(0)
    } else {
        0
    };
    Budget {
        name,
        disruptions_allowed: (healthy - desired).max(0),
        current_healthy: healthy,
        desired_healthy: desired,
        from_status: false,
        always_allow_unhealthy,
    }
}

/// What evicting `pod` (covered by `budget`) does.
pub fn decide(pod: &Value, budget: &Budget) -> Outcome {
    if ignores_budgets(pod) {
        return Outcome::Delete;
    }
    // An unhealthy Pod may go when the budget is met without it (or the budget says so).
    if !is_ready(pod)
        && (budget.always_allow_unhealthy
            || (budget.desired_healthy > 0 && budget.current_healthy >= budget.desired_healthy))
    {
        return Outcome::Delete;
    }
    if budget.disruptions_allowed <= 0 {
        return Outcome::Refuse(format!(
            "The disruption budget {} needs {} healthy pods and has {} currently",
            budget.name, budget.desired_healthy, budget.current_healthy
        ));
    }
    if budget.from_status {
        Outcome::Disrupt
    } else {
        Outcome::Delete
    }
}

/// The status of `pdb` once `pod` was evicted against it: one disruption fewer allowed, and
/// the Pod recorded as disrupted at `now` (until the controller sees it gone).
pub fn disrupted_status(pdb: &Value, pod: &str, now: &str) -> Value {
    let mut status = pdb["status"].clone();
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    status["disruptionsAllowed"] = json!((allowed - 1).max(0));
    if !status["disruptedPods"].is_object() {
        status["disruptedPods"] = json!({});
    }
    status["disruptedPods"][pod] = json!(now);
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": "web"}},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        json!({"metadata": {"name": "web", "generation": 1}, "spec": spec})
    }

    #[test]
    fn a_budget_without_status_is_worked_out_from_its_pods() {
        let pods = [pod("a", true), pod("b", true), pod("c", false)];
        let min = budget(&pdb(json!({"minAvailable": 1})), &pods);
        assert_eq!((min.current_healthy, min.desired_healthy), (2, 1));
        assert_eq!(min.disruptions_allowed, 1);
        assert!(!min.from_status);
        let max = budget(&pdb(json!({"maxUnavailable": "50%"})), &pods);
        // 50% of 3 rounds up to 2 unavailable: 1 must stay healthy.
        assert_eq!((max.desired_healthy, max.disruptions_allowed), (1, 1));
        let all = budget(&pdb(json!({"minAvailable": "100%"})), &pods);
        assert_eq!(all.disruptions_allowed, 0);
    }

    #[test]
    fn a_budget_with_current_status_is_read_from_it() {
        let mut b = pdb(json!({"minAvailable": 1}));
        b["status"] = json!({"observedGeneration": 1, "disruptionsAllowed": 0,
            "currentHealthy": 1, "desiredHealthy": 1});
        let read = budget(&b, &[pod("a", true), pod("b", true)]);
        assert!(read.from_status);
        assert_eq!(read.disruptions_allowed, 0);
        // Written for an older generation: worked out again.
        b["metadata"]["generation"] = json!(2);
        assert!(!budget(&b, &[]).from_status);
    }

    #[test]
    fn evictions_are_refused_only_when_the_budget_is_spent() {
        let pods = [pod("a", true)];
        let spent = budget(&pdb(json!({"minAvailable": 1})), &pods);
        assert_eq!(
            decide(&pods[0], &spent),
            Outcome::Refuse(
                "The disruption budget web needs 1 healthy pods and has 1 currently".into()
            )
        );
        // Not running yet: nothing to disrupt.
        let pending = json!({"metadata": {"name": "p", "labels": {"app": "web"}}});
        assert_eq!(decide(&pending, &spent), Outcome::Delete);
        let mut stored = spent.clone();
        stored.from_status = true;
        stored.disruptions_allowed = 1;
        assert_eq!(decide(&pods[0], &stored), Outcome::Disrupt);
        // An unready Pod may go while the healthy ones meet the budget.
        assert_eq!(decide(&pod("c", false), &spent), Outcome::Delete);
    }

    #[test]
    fn selectors_and_disrupted_status() {
        let mut b = pdb(json!({}));
        assert!(selects(&b, &pod("a", true)));
        b["spec"]["selector"] = Value::Null;
        assert!(!selects(&b, &pod("a", true)));
        b["status"] = json!({"disruptionsAllowed": 2});
        let s = disrupted_status(&b, "a", "2026-01-01T00:00:00Z");
        assert_eq!(s["disruptionsAllowed"], 1);
        assert_eq!(s["disruptedPods"]["a"], "2026-01-01T00:00:00Z");
    }
}
