//! Reading fields of an object as JSON and formatting them as kube-apiserver's printers do:
//! ages, label maps and selectors, container lists, `<none>` for nothing.

use jiff::Timestamp;
use serde_json::Value;

/// The string at `ptr` (a JSON pointer), or `""`.
pub fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// The integer at `ptr`, if there is one.
pub fn int_at(obj: &Value, ptr: &str) -> Option<i64> {
    obj.pointer(ptr).and_then(Value::as_i64)
}

/// The integer at `ptr`, or 0 (an unset counter).
pub fn count(obj: &Value, ptr: &str) -> i64 {
    int_at(obj, ptr).unwrap_or(0)
}

/// The items of the array at `ptr` (none when absent).
pub fn items<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `s`, or `default` where `s` is empty (an unset field the API defaults).
pub fn non_empty_or<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() { default } else { s }
}

/// The first of `obj`'s `status.conditions` of type `kind`.
pub fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    items(obj, "/status/conditions")
        .iter()
        .find(|c| text(c, "/type") == kind)
}

/// How many entries the object or array at `ptr` has.
pub fn len_at(obj: &Value, ptr: &str) -> i64 {
    match obj.pointer(ptr) {
        Some(Value::Object(m)) => m.len() as i64,
        Some(Value::Array(a)) => a.len() as i64,
        _ => 0,
    }
}

/// `s`, or `<none>` when it is empty.
pub fn or_none(s: impl Into<String>) -> String {
    let s = s.into();
    if s.is_empty() { "<none>".into() } else { s }
}

/// An RFC 3339 timestamp.
pub fn timestamp(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

/// Kubernetes' short human duration (`5s`, `3m20s`, `4h`, `2d3h`, `3y`).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h) = (s / 60, s / 3600);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        let d = h / 24;
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{}d", h / 24)
    } else if h < 24 * 365 * 8 {
        let d = h / 24;
        if d % 365 == 0 {
            format!("{}y", d / 365)
        } else {
            format!("{}y{}d", d / 365, d % 365)
        }
    } else {
        format!("{}y", h / 24 / 365)
    }
}

/// How long `from` came before `to`, as `kubectl get` shows ages (`5m2s`, `3h`, `2d3h`).
pub fn between(from: Timestamp, to: Timestamp) -> String {
    human_duration(to.as_second() - from.as_second())
}

/// How long ago `ts` was; `<unknown>` for no time.
pub fn since(ts: &str, now: Timestamp) -> String {
    match timestamp(ts) {
        Some(t) => between(t, now),
        None => "<unknown>".into(),
    }
}

/// The `Age` cell: time since `metadata.creationTimestamp`.
pub fn age(obj: &Value, now: Timestamp) -> Value {
    since(text(obj, "/metadata/creationTimestamp"), now).into()
}

/// The `Created At` cell of kinds without a printer of their own: the creation time in UTC.
pub fn created_at(obj: &Value, _now: Timestamp) -> Value {
    match timestamp(text(obj, "/metadata/creationTimestamp")) {
        Some(t) => t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().into(),
        None => Value::Null,
    }
}

/// A label map as `a=1,b=2` (sorted by key), `<none>` when empty.
pub fn label_map(map: Option<&Value>) -> String {
    let mut pairs: Vec<(&String, &Value)> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .collect();
    pairs.sort_unstable_by_key(|(k, _)| *k);
    let pairs: Vec<String> = pairs
        .into_iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    or_none(pairs.join(","))
}

/// A `LabelSelector` in selector syntax (`app=web,tier in (a,b),!legacy`), requirements
/// sorted by key; `""` for a missing or empty selector, which selects everything.
pub fn selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return String::new();
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in items(sel, "/matchExpressions") {
        let key = text(e, "/key");
        let mut values: Vec<&str> = items(e, "/values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let values = values.join(",");
        let req = match text(e, "/operator") {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key.to_owned(), req));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, r)| r)
        .collect::<Vec<_>>()
        .join(",")
}

/// A `LabelSelector` as the `Selector` columns show it: `<none>` when it selects everything.
pub fn selector_or_none(sel: Option<&Value>) -> String {
    or_none(selector(sel))
}

/// The names and the images of a pod spec's containers, each comma-separated.
pub fn containers(pod_spec: Option<&Value>) -> (String, String) {
    let list = pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let names: Vec<&str> = list.iter().map(|c| text(c, "/name")).collect();
    let images: Vec<&str> = list.iter().map(|c| text(c, "/image")).collect();
    (names.join(","), images.join(","))
}

/// `True`/`False`, or `<unset>` for no value, as boolean settings print.
pub fn bool_word(v: Option<bool>) -> String {
    match v {
        Some(true) => "True".into(),
        Some(false) => "False".into(),
        None => "<unset>".into(),
    }
}

/// An int-or-string field (`2`, `"50%"`) as written; `None` when absent.
pub fn int_or_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_like_kubernetes() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(-5), "<invalid>");
    }

    #[test]
    fn ages_and_creation_times() {
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let obj = json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:55:00Z"}});
        assert_eq!(age(&obj, now), "5m");
        assert_eq!(age(&json!({}), now), "<unknown>");
        assert_eq!(created_at(&obj, now), "2026-01-01T00:55:00Z");
        assert_eq!(since("2026-01-01T00:59:58.5Z", now), "2s");
    }

    #[test]
    fn label_maps_sorted_or_none() {
        assert_eq!(
            label_map(Some(&json!({"b": "2", "a.b": "3", "a": "1"}))),
            "a=1,a.b=3,b=2"
        );
        assert_eq!(label_map(Some(&json!({}))), "<none>");
        assert_eq!(label_map(None), "<none>");
    }

    #[test]
    fn selectors_in_selector_syntax() {
        let sel = json!({"matchLabels": {"tier": "web", "app": "x"}, "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "dev"]},
            {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "NotIn", "values": ["b"]},
            {"key": "gpu", "operator": "Exists"}]});
        assert_eq!(
            selector(Some(&sel)),
            "app=x,env in (dev,prod),gpu,!legacy,tier=web,zone notin (b)"
        );
        assert_eq!(selector(Some(&json!({}))), "");
        assert_eq!(selector_or_none(None), "<none>");
    }

    #[test]
    fn container_names_and_images() {
        let spec =
            json!({"containers": [{"name": "a", "image": "i:1"}, {"name": "b", "image": "j"}]});
        assert_eq!(containers(Some(&spec)), ("a,b".into(), "i:1,j".into()));
        assert_eq!(containers(None), (String::new(), String::new()));
    }

    #[test]
    fn booleans_and_int_or_strings() {
        assert_eq!(bool_word(Some(true)), "True");
        assert_eq!(bool_word(None), "<unset>");
        assert_eq!(int_or_string(Some(&json!(2))).as_deref(), Some("2"));
        assert_eq!(int_or_string(Some(&json!("50%"))).as_deref(), Some("50%"));
        assert_eq!(int_or_string(None), None);
    }
}
