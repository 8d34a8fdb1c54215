//! Adding a requirement to a Pod spec's required node affinity: ANDed into every
//! `nodeSelectorTerm` (terms are ORed, so each must carry it), or a new term when there is
//! none. A requirement on the same key is replaced, so that applying twice changes nothing.

use serde_json::{Value, json};

/// `{key, operator: Gt, values: [n]}`.
pub fn greater_than(key: &str, n: i64) -> Value {
    json!({"key": key, "operator": "Gt", "values": [n.to_string()]})
}

/// ANDs `requirement` into `pod_spec`'s required node affinity.
pub fn require(pod_spec: &mut Value, requirement: Value) {
    let key = requirement["key"].clone();
    let terms = &mut pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    if terms.as_array().is_none_or(|t| t.is_empty()) {
        *terms = json!([{"matchExpressions": []}]);
    }
    for term in terms.as_array_mut().into_iter().flatten() {
        let exprs = &mut term["matchExpressions"];
        if !exprs.is_array() {
            *exprs = json!([]);
        }
        let list = exprs.as_array_mut().expect("made an array");
        list.retain(|e| e["key"] != key);
        list.push(requirement.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anded_into_every_term_once() {
        let mut spec = json!({"containers": []});
        require(&mut spec, greater_than("k", 1));
        require(&mut spec, greater_than("k", 2));
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["2"]}]}]})
        );
        let mut spec = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
        ]}}}});
        require(&mut spec, greater_than("k", 0));
        let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        assert_eq!(terms[0]["matchExpressions"].as_array().unwrap().len(), 2);
        assert_eq!(terms[1]["matchExpressions"][0]["key"], "k");
        assert_eq!(terms[1]["matchFields"][0]["key"], "metadata.name");
    }
}
