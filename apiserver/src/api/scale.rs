//! The `scale` subresource: an object's replica count and selector seen as `autoscaling/v1`
//! `Scale`. The built-in workloads keep them at `spec.replicas`, `status.replicas` and
//! `spec.selector` (a `LabelSelector` object); a custom kind at the paths its CRD declares
//! under `subresources.scale` (the selector there is already text). Pure.

use serde_json::{Map, Value, json};

use super::selectors::LabelSelector;

/// Where the selector of a scalable kind is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Selector {
    /// A `LabelSelector` object (built-in workloads).
    Object(String),
    /// Text, as `labelSelectorPath` points at.
    Text(String),
    None,
}

/// Where an object keeps what its `Scale` shows (JSON pointers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    spec_replicas: String,
    status_replicas: String,
    selector: Selector,
    /// What `spec.replicas` means when the object has none (the built-ins default to 1).
    default_replicas: i64,
}

/// What makes a `scale` subresource write invalid.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScaleError {
    /// `spec.replicas` is not a whole number.
    #[error("spec.replicas: Invalid value: {0}: must be a whole number")]
    NotANumber(String),
    /// `spec.replicas` is negative.
    #[error("spec.replicas: Invalid value: {0}: must be greater than or equal to 0")]
    Negative(i64),
}

/// The paths of Deployments, ReplicaSets and StatefulSets.
pub fn builtin() -> ScalePaths {
    ScalePaths {
        spec_replicas: "/spec/replicas".into(),
        status_replicas: "/status/replicas".into(),
        selector: Selector::Object("/spec/selector".into()),
        default_replicas: 1,
    }
}

/// `.spec.replicas` as a JSON pointer; only dotted field paths (what a CRD may declare).
fn pointer_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix('.')?;
    let valid = |s: &str| !s.is_empty() && !s.contains(['[', ']', '/', '~']);
    rest.split('.')
        .all(valid)
        .then(|| format!("/{}", rest.replace('.', "/")))
}

/// The paths CRD `crd` declares for `version` (`subresources.scale`), if it declares them.
pub fn of_crd(crd: &Value, version: &str) -> Option<ScalePaths> {
    let versions = crd.pointer("/spec/versions")?.as_array()?;
    let v = versions.iter().find(|v| v["name"] == version)?;
    let scale = v.pointer("/subresources/scale")?;
    let path = |k: &str| scale.get(k).and_then(Value::as_str).and_then(pointer_of);
    Some(ScalePaths {
        spec_replicas: path("specReplicasPath")?,
        status_replicas: path("statusReplicasPath")?,
        selector: path("labelSelectorPath").map_or(Selector::None, Selector::Text),
        default_replicas: 0,
    })
}

/// The `Scale` of `obj` (in its served form).
pub fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let int = |p: &str| obj.pointer(p).and_then(Value::as_i64);
    let selector = match &paths.selector {
        Selector::Object(p) => obj
            .pointer(p)
            .map(|s| LabelSelector::from_object(s).to_string())
            .unwrap_or_default(),
        Selector::Text(p) => obj
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        Selector::None => String::new(),
    };
    let mut meta = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj.pointer(&format!("/metadata/{k}")) {
            meta.insert(k.into(), v.clone());
        }
    }
    let mut status = json!({"replicas": int(&paths.status_replicas).unwrap_or(0)});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": meta,
        "spec": {"replicas": int(&paths.spec_replicas).unwrap_or(paths.default_replicas)},
        "status": status,
    })
}

/// The replica count a `Scale` asks for (none given is 0, as the field's zero value).
pub fn requested_replicas(scale: &Value) -> Result<i64, ScaleError> {
    match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(v) => match v.as_i64() {
            Some(n) if n < 0 => Err(ScaleError::Negative(n)),
            Some(n) if n <= i64::from(i32::MAX) => Ok(n),
            _ => Err(ScaleError::NotANumber(v.to_string())),
        },
    }
}

/// `obj` with `replicas` at its spec path (made where missing).
pub fn with_replicas(obj: &Value, paths: &ScalePaths, replicas: i64) -> Value {
    let mut out = obj.clone();
    let mut at = &mut out;
    let segments: Vec<&str> = paths.spec_replicas.split('/').skip(1).collect();
    let (last, parents) = segments.split_last().expect("a pointer has a segment");
    for s in parents {
        if !at.get(*s).is_some_and(Value::is_object) {
            at[*s] = json!({});
        }
        at = &mut at[*s];
    }
    at[*last] = json!(replicas);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "uid": "u", "resourceVersion": "7",
                "labels": {"x": "y"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2}})
    }

    #[test]
    fn a_deployment_reads_as_a_scale() {
        let s = scale_of(&deployment(), &builtin());
        assert_eq!(s["kind"], "Scale");
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=web"}));
        assert_eq!(s["metadata"]["resourceVersion"], "7");
        assert!(s["metadata"].get("labels").is_none());
        let unset = json!({"metadata": {"name": "w"}, "spec": {}});
        assert_eq!(scale_of(&unset, &builtin())["spec"]["replicas"], 1);
    }

    #[test]
    fn replicas_are_set_and_checked() {
        let d = with_replicas(&deployment(), &builtin(), 5);
        assert_eq!(d["spec"]["replicas"], 5);
        assert_eq!(d["spec"]["selector"], deployment()["spec"]["selector"]);
        assert_eq!(requested_replicas(&json!({"spec": {"replicas": 4}})), Ok(4));
        assert_eq!(
            requested_replicas(&json!({"spec": {"replicas": -1}})),
            Err(ScaleError::Negative(-1))
        );
        assert!(requested_replicas(&json!({"spec": {"replicas": "2"}})).is_err());
    }

    #[test]
    fn a_crd_declares_its_paths() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "subresources": {"scale": {
            "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.ready",
            "labelSelectorPath": ".status.selector"}}}]}});
        let paths = of_crd(&crd, "v1").unwrap();
        assert!(of_crd(&crd, "v2").is_none());
        let obj = json!({"metadata": {"name": "w"}, "status": {"ready": 1, "selector": "a=b"}});
        let s = scale_of(&obj, &paths);
        assert_eq!(s["spec"]["replicas"], 0);
        assert_eq!(s["status"], json!({"replicas": 1, "selector": "a=b"}));
        assert_eq!(with_replicas(&obj, &paths, 2)["spec"], json!({"size": 2}));
        assert_eq!(pointer_of(".spec.a.b"), Some("/spec/a/b".into()));
        assert_eq!(pointer_of("spec.a"), None);
        assert_eq!(pointer_of(".spec.list[0]"), None);
    }
}
