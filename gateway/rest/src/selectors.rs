//! Label and field selectors: parsing the query parameters and matching objects.

use std::collections::BTreeMap;

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelRequirement {
    /// `key`: the label is present.
    Exists(String),
    /// `!key`: the label is absent.
    NotExists(String),
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value`: the label is absent or has another value.
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn(String, Vec<String>),
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelRequirement>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Why a selector could not be read (kube-apiserver's wording).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `in` or `notin` without a parenthesised set.
    #[error("expected a parenthesised set of values, found '{0}'")]
    NotASet(String),
    /// A value of a set is not a valid label value.
    #[error("invalid label value: '{0}'")]
    SetValue(String),
    /// A key is not a valid label key.
    #[error("unable to parse requirement: invalid label key \"{0}\"")]
    LabelKey(String),
    /// A value is not a valid label value.
    #[error("unable to parse requirement: invalid label value: \"{0}\"")]
    LabelValue(String),
    /// A requirement matches none of the selector forms.
    #[error("invalid selector: '{0}'; can't understand '{0}'")]
    Unreadable(String),
    /// A field selector names a field the resource does not select on.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

fn set_values(s: &str) -> Result<Vec<String>, SelectorError> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError::NotASet(s.to_owned()))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    if let Some(bad) = values.iter().find(|v| !valid_value(v)) {
        return Err(SelectorError::SetValue(bad.clone()));
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses a `labelSelector` query value; empty selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelRequirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelRequirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelRequirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                LabelRequirement::NotIn(k.trim().to_owned(), set_values(rest)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                LabelRequirement::In(k.trim().to_owned(), set_values(rest)?)
            } else {
                LabelRequirement::Exists(part.to_owned())
            };
            let (key, value) = match &req {
                LabelRequirement::Exists(k) | LabelRequirement::NotExists(k) => (k, None),
                LabelRequirement::Equals(k, v) | LabelRequirement::NotEquals(k, v) => (k, Some(v)),
                LabelRequirement::In(k, _) | LabelRequirement::NotIn(k, _) => (k, None),
            };
            if !valid_key(key) {
                return Err(SelectorError::LabelKey(key.clone()));
            }
            if let Some(v) = value
                && !valid_value(v)
            {
                return Err(SelectorError::LabelValue(v.clone()));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelRequirement::Exists(k) => labels.contains_key(k),
            LabelRequirement::NotExists(k) => !labels.contains_key(k),
            LabelRequirement::Equals(k, v) => labels.get(k) == Some(v),
            LabelRequirement::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelRequirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelRequirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        })
    }
}

impl LabelSelector {
    /// The requirements of a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`),
    /// sorted by key as kube-apiserver orders them. An operator it does not know matches
    /// nothing; a missing or empty selector matches everything.
    pub fn from_object(selector: &Value) -> Self {
        let mut reqs = Vec::new();
        let labels = selector.get("matchLabels").and_then(Value::as_object);
        for (k, v) in labels.into_iter().flatten() {
            reqs.push(LabelRequirement::Equals(
                k.clone(),
                v.as_str().unwrap_or_default().to_owned(),
            ));
        }
        let expressions = selector.get("matchExpressions").and_then(Value::as_array);
        for e in expressions.into_iter().flatten() {
            let key = e["key"].as_str().unwrap_or_default().to_owned();
            let mut values: Vec<String> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            values.sort();
            reqs.push(match e["operator"].as_str().unwrap_or_default() {
                "In" => LabelRequirement::In(key, values),
                "NotIn" => LabelRequirement::NotIn(key, values),
                "Exists" => LabelRequirement::Exists(key),
                "DoesNotExist" => LabelRequirement::NotExists(key),
                // An empty set: nothing is in it.
                _ => LabelRequirement::In(key, Vec::new()),
            });
        }
        reqs.sort_by(|a, b| a.key().cmp(b.key()));
        LabelSelector(reqs)
    }
}

impl LabelRequirement {
    /// The label key the requirement is about.
    pub fn key(&self) -> &str {
        match self {
            LabelRequirement::Exists(k)
            | LabelRequirement::NotExists(k)
            | LabelRequirement::Equals(k, _)
            | LabelRequirement::NotEquals(k, _)
            | LabelRequirement::In(k, _)
            | LabelRequirement::NotIn(k, _) => k,
        }
    }
}

/// The text form a `labelSelector` parameter takes (and `Scale.status.selector` holds).
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match r {
                LabelRequirement::Exists(k) => k.clone(),
                LabelRequirement::NotExists(k) => format!("!{k}"),
                LabelRequirement::Equals(k, v) => format!("{k}={v}"),
                LabelRequirement::NotEquals(k, v) => format!("{k}!={v}"),
                LabelRequirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                LabelRequirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// The labels of an object.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A parsed `fieldSelector`: `field=value`, `field==value` or `field!=value`, comma separated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `s`; `selectable` are the fields the kind offers besides `metadata.name` and
    /// `metadata.namespace` ([`crate::resource::ResourceDef::selectable_fields`]).
    pub fn parse(s: &str, selectable: &[String]) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError::Unreadable(part.to_owned()));
            };
            let field = field.trim();
            if !matches!(field, "metadata.name" | "metadata.namespace")
                && !selectable.iter().any(|f| f == field)
            {
                return Err(SelectorError::UnsupportedField(field.to_owned()));
            }
            reqs.push((field.to_owned(), eq, value.trim().to_owned()));
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object is selected.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, eq, want)| {
            let have = field_value(obj, field);
            (have == *want) == *eq
        })
    }

    /// The name this selector pins (`metadata.name=x`), if any: lets a watch of one object skip
    /// the rest.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

/// The selectable fields of built-in kinds that are booleans: kube-apiserver matches a field
/// selector against the typed object, where an unset boolean reads `false`.
const BOOLEAN_FIELDS: &[&str] = &["spec.unschedulable", "spec.hostNetwork"];

fn field_value(obj: &Value, field: &str) -> String {
    let mut cur = obj;
    for part in field.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None if BOOLEAN_FIELDS.contains(&field) => return "false".to_owned(),
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Object(o) if field == "source" => o
            .get("component")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selector_objects_read_as_sorted_text_and_match() {
        let sel = LabelSelector::from_object(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }));
        assert_eq!(sel.to_string(), "app=web,!canary,tier in (a,b)");
        assert_eq!(LabelSelector::parse(&sel.to_string()).unwrap().0.len(), 3);
        assert!(sel.matches(&labels(&[("app", "web"), ("tier", "a")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "c")])));
        let odd = LabelSelector::from_object(&json!({"matchExpressions": [
            {"key": "x", "operator": "Near", "values": ["1"]}]}));
        assert!(!odd.matches(&labels(&[("x", "1")])));
        assert!(LabelSelector::from_object(&json!({})).matches(&labels(&[])));
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&l);
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("env!=prod"));
        assert!(m("app in (web, api)"));
        assert!(!m("app in (api)"));
        assert!(m("app notin (api)"));
        assert!(m("env notin (prod)"));
        assert!(!m("tier notin (front,back)"));
        assert!(m("app"));
        assert!(!m("env"));
        assert!(m("!env"));
        assert!(!m("!app"));
        assert!(m("app=web,tier in (front),!env"));
        assert!(!m("app=web,tier=back"));
    }

    #[test]
    fn rejects_bad_selectors() {
        assert!(LabelSelector::parse("a b=c").is_err());
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("app=we b").is_err());
    }

    #[test]
    fn field_selectors() {
        let kind = |plural: &str| {
            crate::resource::builtins()
                .into_iter()
                .find(|d| d.plural == plural && d.group.is_empty())
                .unwrap()
                .selectable_fields
        };
        let (pods, configmaps, events) = (kind("pods"), kind("configmaps"), kind("events"));
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let m = |s: &str| FieldSelector::parse(s, &pods).unwrap().matches(&pod);
        assert!(m("metadata.name=p"));
        assert!(m("metadata.namespace==ns,spec.nodeName=n1"));
        assert!(!m("status.phase!=Running"));
        assert!(m("spec.nodeName!=n2"));
        assert!(m("spec.hostNetwork==false") && !m("spec.hostNetwork=true"));
        let nodes = kind("nodes");
        let node = |spec: Value| json!({"metadata": {"name": "n"}, "spec": spec});
        let unschedulable =
            |s: &str, n: &Value| FieldSelector::parse(s, &nodes).unwrap().matches(n);
        assert!(unschedulable("spec.unschedulable==false", &node(json!({}))));
        assert!(!unschedulable("spec.unschedulable==true", &node(json!({}))));
        assert!(unschedulable(
            "spec.unschedulable=true",
            &node(json!({"unschedulable": true}))
        ));
        assert_eq!(
            FieldSelector::parse("spec.nodeName=x", &configmaps),
            Err(SelectorError::UnsupportedField("spec.nodeName".into()))
        );
        let ev = json!({"involvedObject": {"kind": "Pod", "name": "p"}});
        assert!(
            FieldSelector::parse("involvedObject.kind=Pod,involvedObject.name=p", &events)
                .unwrap()
                .matches(&ev)
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=x", &pods)
                .unwrap()
                .pinned_name(),
            Some("x")
        );
    }
}
