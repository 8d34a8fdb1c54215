//! A CRD's `x-kubernetes-validations` rules checked when the CRD is written, as
//! kube-apiserver checks them: each must compile within [`super::cel_bounds`], name only
//! fields its schema node has, and be estimated ([`super::cel_cost`]) within the budget per
//! call; all together, each times the calls it gets (once per element of the lists and maps
//! it sits under), within the budget per object.

use serde_json::Value;

use super::cel_cost;
use super::cel_rules::{
    Refused, Step, children, compile, count_rules, field_path, flag, has_rules, reason, rules_of,
    str_at,
};
use super::field_errors::{FieldError, MAX_CAUSES, Problem};

/// The most rules one version's schema may carry: checking them is bounded work per CRD write.
const MAX_RULES: usize = 1024;

/// The path of a child schema in a CRD, as kube-apiserver names it.
fn schema_path(path: &str, step: Step<'_>) -> String {
    match step {
        Step::Property(k) => format!("{path}.properties[{k}]"),
        Step::Items => format!("{path}.items"),
        Step::Additional => format!("{path}.additionalProperties"),
    }
}

/// What checking a CRD's schema collects.
struct SchemaCheck {
    errors: Vec<FieldError>,
    /// Every rule's estimated cost times its calls.
    total: u64,
    /// The rules that added to it.
    rule_paths: Vec<String>,
}

impl SchemaCheck {
    fn node(&mut self, schema: &Value, path: &str, calls: u64, correlatable: bool) {
        for (j, rule) in rules_of(schema).iter().enumerate() {
            self.rule(
                schema,
                rule,
                &format!("{path}.x-kubernetes-validations[{j}]"),
                calls,
                correlatable,
            );
        }
        for (step, child) in children(schema) {
            let (calls, correlatable) = match step {
                Step::Property(_) => (calls, correlatable),
                // Items correlate with old ones only by a map list's keys.
                Step::Items => (
                    calls.saturating_mul(cel_cost::max_size(schema)),
                    correlatable && str_at(schema, "x-kubernetes-list-type") == Some("map"),
                ),
                Step::Additional => (
                    calls.saturating_mul(cel_cost::max_size(schema)),
                    correlatable,
                ),
            };
            self.node(child, &schema_path(path, step), calls, correlatable);
        }
    }

    fn push(&mut self, problem: Problem, field: String, value: Option<Value>, detail: String) {
        if self.errors.len() < MAX_CAUSES {
            self.errors.push(FieldError {
                problem,
                field,
                value,
                detail,
            });
        }
    }

    fn rule(&mut self, schema: &Value, rule: &Value, at: &str, calls: u64, correlatable: bool) {
        // Compiling costs time: none once the answer is full.
        if self.errors.len() >= MAX_CAUSES {
            return;
        }
        let source = str_at(rule, "rule").unwrap_or_default();
        if source.trim().is_empty() {
            self.push(Problem::Required, format!("{at}.rule"), None, String::new());
            return;
        }
        let reason_name = str_at(rule, "reason");
        if reason(reason_name).is_none() {
            self.push(
                Problem::NotSupported,
                format!("{at}.reason"),
                reason_name.map(Value::from),
                r#"supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#.into(),
            );
        }
        if let Some(p) = str_at(rule, "fieldPath")
            && field_path(schema, p).is_none()
        {
            self.push(
                Problem::Invalid,
                format!("{at}.fieldPath"),
                Some(p.into()),
                "fieldPath must name a field of the schema where the rule is".into(),
            );
        }
        if let Some(m) = str_at(rule, "message")
            && m.contains(['\n', '\r'])
        {
            self.push(
                Problem::Invalid,
                format!("{at}.message"),
                Some(m.into()),
                "message must not contain line breaks".into(),
            );
        }
        let mut cost = 0u64;
        match compile(source, schema, "estimated rule cost") {
            Ok((c, estimate)) => {
                cost = estimate;
                if flag(rule, "optionalOldSelf") && !c.transition {
                    self.push(
                        Problem::Invalid,
                        format!("{at}.optionalOldSelf"),
                        Some(true.into()),
                        "may only be set when the rule uses oldSelf".into(),
                    );
                }
                if c.transition && !correlatable {
                    self.push(
                        Problem::Invalid,
                        format!("{at}.rule"),
                        Some(source.into()),
                        "oldSelf cannot be used on the uncorrelatable portion of the schema".into(),
                    );
                }
            }
            Err(e) => self.refused(e, format!("{at}.rule"), source),
        }
        if let Some(m) = str_at(rule, "messageExpression") {
            match compile(m, schema, "estimated messageExpression cost") {
                Ok((_, estimate)) => cost = cost.saturating_add(estimate),
                Err(e) => self.refused(e, format!("{at}.messageExpression"), m),
            }
        }
        self.total = self.total.saturating_add(cost.saturating_mul(calls));
        self.rule_paths.push(format!("{at}.rule"));
    }

    fn refused(&mut self, e: Refused, field: String, source: &str) {
        match e {
            Refused::TooCostly(why) => self.push(Problem::Forbidden, field, None, why),
            e => self.push(Problem::Invalid, field, Some(source.into()), e.to_string()),
        }
    }
}

/// Every way the rules of `crd`'s schemas are refused, at their `spec.versions[i]...` paths.
/// On an update, a version whose schema did not change is not checked again.
pub fn crd_problems(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let versions = |crd: &'_ Value| -> Vec<Value> {
        crd.pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let old_versions = old.map(versions).unwrap_or_default();
    let mut errors = Vec::new();
    for (i, v) in versions(crd).iter().enumerate() {
        let Some(schema) = v.pointer("/schema/openAPIV3Schema") else {
            continue;
        };
        let unchanged = old_versions.iter().any(|o| {
            o.get("name") == v.get("name") && o.pointer("/schema/openAPIV3Schema") == Some(schema)
        });
        if unchanged || !has_rules(schema) {
            continue;
        }
        let root = format!("spec.versions[{i}].schema.openAPIV3Schema");
        if count_rules(schema, MAX_RULES) > MAX_RULES {
            errors.push(FieldError {
                problem: Problem::Forbidden,
                field: root,
                value: None,
                detail: format!(
                    "may carry at most {MAX_RULES} x-kubernetes-validations rules (each is compiled and estimated when the CRD is written)"
                ),
            });
            continue;
        }
        let mut check = SchemaCheck {
            errors: Vec::new(),
            total: 0,
            rule_paths: Vec::new(),
        };
        check.node(schema, &root, 1, true);
        if check.total > cel_cost::SCHEMA_LIMIT {
            for p in std::mem::take(&mut check.rule_paths) {
                check.push(
                    Problem::Forbidden,
                    p,
                    None,
                    "contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema".into(),
                );
            }
            check.push(
                Problem::Forbidden,
                root,
                None,
                cel_cost::over_budget(
                    "x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema",
                    check.total,
                    cel_cost::SCHEMA_LIMIT,
                ),
            );
        }
        errors.extend(check.errors);
    }
    errors.truncate(MAX_CAUSES);
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(schema: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    }

    fn crd_messages(schema: Value) -> Vec<String> {
        crd_problems(&crd(schema), None)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn a_crd_with_bad_rules_is_refused_at_the_rule() {
        let bad = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.("}, {"rule": ""},
                {"rule": "true", "reason": "Nope", "fieldPath": ".missing"},
                {"rule": "self.nope == 1"}],
            "properties": {"list": {"type": "array", "items": {"type": "integer",
                "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}}});
        let got = crd_messages(bad);
        let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
        assert_eq!(got.len(), 6, "{got:#?}");
        assert!(got[0].starts_with(&format!(
            "{at}.x-kubernetes-validations[0].rule: Invalid value: \"self.(\": compilation failed: "
        )), "{got:#?}");
        assert_eq!(
            got[1],
            format!("{at}.x-kubernetes-validations[1].rule: Required value")
        );
        assert!(got[2].starts_with(&format!(
            "{at}.x-kubernetes-validations[2].reason: Unsupported value: \"Nope\""
        )));
        assert!(got[3].starts_with(&format!(
            "{at}.x-kubernetes-validations[2].fieldPath: Invalid value: \".missing\""
        )));
        assert_eq!(
            got[4],
            format!(
                "{at}.x-kubernetes-validations[3].rule: Invalid value: \"self.nope == 1\": compilation failed: undefined field 'nope'"
            )
        );
        assert!(got[5].starts_with(&format!(
            "{at}.properties[list].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used"
        )), "{got:#?}");
    }

    #[test]
    fn a_crd_with_costly_rules_is_refused_with_the_estimate() {
        let costly = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"list": {"type": "array", "items": {"type": "string"},
                "x-kubernetes-validations": [{"rule": "self.all(x, self.exists(y, x == y))"}]}}}}});
        let got = crd_messages(costly);
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(got[0].starts_with(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].x-kubernetes-validations[0].rule: \
             Forbidden: estimated rule cost exceeds budget by factor of more than 100x (estimated cost "
        ), "{got:#?}");
        // Each cheap, but run for every element of two unbounded nested lists.
        let many = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"outer": {"type": "array", "items": {"type": "array", "items": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self.size() > 1"}]}}}}}}});
        let got = crd_messages(many);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert!(got[0].contains("contributed to estimated rule & messageExpression cost total"));
        assert!(got[1].starts_with("spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget"));
        // Too many rules to check on one write.
        let rules: Vec<Value> = (0..=MAX_RULES).map(|_| json!({"rule": "true"})).collect();
        let got = crd_messages(json!({"type": "object", "x-kubernetes-validations": rules}));
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(got[0].starts_with(
            "spec.versions[0].schema.openAPIV3Schema: Forbidden: may carry at most 1024"
        ));
        // Unchanged on an update: not checked again.
        let c = crd(json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.("}]}));
        assert!(crd_problems(&c, Some(&c)).is_empty());
        assert_eq!(crd_problems(&c, None).len(), 1);
    }
}
