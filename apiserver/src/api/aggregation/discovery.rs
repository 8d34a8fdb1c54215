//! What aggregation adds to discovery: the kinds of each APIService's backend (from the
//! `APIResourceList` its availability check fetched), every APIService's group and version
//! even before its backend answered, and kube-aggregator's order: groups by
//! `groupPriorityMinimum` (highest first, then by name), versions in a group by
//! `versionPriority` (highest first, then GA before beta before alpha, newest first). Pure.

use std::cmp::Ordering;

use serde_json::{Value, json};

use super::registry::ApiService;
use crate::registry::{KindRef, ResourceDef, Subresource};

/// The group priority of built-in groups (kube-apiserver gives its own groups 16000–18000).
const BUILTIN_GROUP_PRIORITY: i64 = 17000;
/// The group priority of groups served only by CRDs (as kube-apiserver's CRD registration).
const CRD_GROUP_PRIORITY: i64 = 1000;
/// The version priority of versions no APIService names.
const LOCAL_VERSION_PRIORITY: i64 = 15;

/// The kinds an `APIResourceList` of `group`/`version` lists, as definitions discovery builds
/// its documents from.
pub fn defs_of(list: &Value, group: &str, version: &str) -> Vec<ResourceDef> {
    let entries = list["resources"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut defs: Vec<ResourceDef> = Vec::new();
    for e in entries {
        let Some(name) = e["name"].as_str() else {
            continue;
        };
        if let Some((plural, sub)) = name.split_once('/') {
            if let Some(d) = defs.iter_mut().find(|d| d.plural == plural) {
                d.subresources.push(Subresource {
                    name: sub.to_owned(),
                    verbs: strings(&e["verbs"]),
                    kind: subresource_kind(e, &d.kind),
                });
            }
            continue;
        }
        let kind = e["kind"].as_str().unwrap_or_default().to_owned();
        defs.push(ResourceDef {
            group: group.to_owned(),
            storage_group: group.to_owned(),
            versions: vec![version.to_owned()],
            list_kind: format!("{kind}List"),
            kind,
            plural: name.to_owned(),
            singular: e["singularName"].as_str().unwrap_or_default().to_owned(),
            namespaced: e["namespaced"].as_bool().unwrap_or(false),
            short_names: strings(&e["shortNames"]),
            categories: strings(&e["categories"]),
            verbs: strings(&e["verbs"]),
            subresources: Vec::new(),
            columns: Vec::new(),
            selectable_fields: Vec::new(),
            custom: true,
            schema: None,
            defaults_on_read: false,
        });
    }
    defs
}

/// The kind a backend says a subresource entry takes, when not the resource's own.
fn subresource_kind(entry: &Value, resource_kind: &str) -> Option<KindRef> {
    let text = |k: &str| entry[k].as_str().unwrap_or_default();
    let other = (!text("kind").is_empty() && text("kind") != resource_kind)
        || !text("group").is_empty()
        || !text("version").is_empty();
    other.then(|| KindRef::new(text("group"), text("version"), text("kind")))
}

fn group_priority(group: &str, services: &[ApiService], local: &[ResourceDef]) -> i64 {
    let own = services
        .iter()
        .filter(|s| s.group == group)
        .map(|s| s.group_priority_minimum);
    let defs = local.iter().filter(|d| d.group == group);
    let by_defs = defs.map(|d| {
        if d.custom {
            CRD_GROUP_PRIORITY
        } else {
            BUILTIN_GROUP_PRIORITY
        }
    });
    own.chain(by_defs).max().unwrap_or(0)
}

fn version_priority(group: &str, version: &str, services: &[ApiService]) -> i64 {
    services
        .iter()
        .find(|s| s.group == group && s.version == version)
        .map_or(LOCAL_VERSION_PRIORITY, |s| s.version_priority)
}

/// `v1` > `v1beta2` > `v1beta1` > `v1alpha1`, higher majors first; names of another shape
/// after all of those, alphabetically.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parts(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (level, n) = if tail.is_empty() {
            (2, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (1, n.parse().ok()?)
        } else {
            (0, tail.strip_prefix("alpha")?.parse().ok()?)
        };
        Some((major, level, n))
    }
    match (parts(a), parts(b)) {
        (Some((ma, la, na)), Some((mb, lb, nb))) => lb.cmp(&la).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn order_versions(group: &str, versions: &mut [Value], services: &[ApiService]) {
    versions.sort_by(|a, b| {
        let (a, b) = (
            a["version"].as_str().unwrap_or_default(),
            b["version"].as_str().unwrap_or_default(),
        );
        version_priority(group, b, services)
            .cmp(&version_priority(group, a, services))
            .then_with(|| compare_versions(a, b))
    });
}

fn order_groups(
    groups: &mut [Value],
    name: fn(&Value) -> &str,
    services: &[ApiService],
    local: &[ResourceDef],
) {
    groups.sort_by(|a, b| {
        let (a, b) = (name(a), name(b));
        group_priority(b, services, local)
            .cmp(&group_priority(a, services, local))
            .then_with(|| a.cmp(b))
    });
}

/// One group of a legacy document (`/apis`' item or `/apis/G`) with every APIService version
/// of the group added and the versions ordered.
fn arrange_group(doc: &mut Value, services: &[ApiService]) {
    let name = doc["name"].as_str().unwrap_or_default().to_owned();
    let mut versions = doc["versions"].as_array().cloned().unwrap_or_default();
    for s in services.iter().filter(|s| s.group == name) {
        if !versions.iter().any(|v| v["version"] == s.version) {
            versions.push(
                json!({"groupVersion": format!("{name}/{}", s.version), "version": s.version}),
            );
        }
    }
    order_versions(&name, &mut versions, services);
    doc["preferredVersion"] = versions.first().cloned().unwrap_or(Value::Null);
    doc["versions"] = Value::Array(versions);
}

/// `/apis` (an `APIGroupList`): the APIServices' groups added, all ordered.
pub fn arrange_group_list(doc: &mut Value, services: &[ApiService], local: &[ResourceDef]) {
    let mut groups = doc["groups"].as_array().cloned().unwrap_or_default();
    for s in services.iter().filter(|s| !s.group.is_empty()) {
        if !groups.iter().any(|g| g["name"] == s.group) {
            groups.push(json!({"name": s.group, "versions": []}));
        }
    }
    for g in &mut groups {
        arrange_group(g, services);
    }
    order_groups(
        &mut groups,
        |g| g["name"].as_str().unwrap_or_default(),
        services,
        local,
    );
    doc["groups"] = Value::Array(groups);
}

/// `/apis/G` (an `APIGroup`), or `None` when neither the cluster nor an APIService serves it.
pub fn arrange_group_doc(
    doc: Option<Value>,
    group: &str,
    services: &[ApiService],
) -> Option<Value> {
    let mut doc = match doc {
        Some(d) => d,
        None if services.iter().any(|s| s.group == group) => {
            json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": []})
        }
        None => return None,
    };
    arrange_group(&mut doc, services);
    Some(doc)
}

/// The aggregated (v2) document of `/apis`: every APIService version present (those whose
/// backend has not answered yet with no resources, `Stale`), all ordered.
pub fn arrange_aggregated(doc: &mut Value, services: &[ApiService], local: &[ResourceDef]) {
    let mut items = doc["items"].as_array().cloned().unwrap_or_default();
    for s in services.iter().filter(|s| !s.group.is_empty()) {
        let item = match items
            .iter_mut()
            .position(|i| i["metadata"]["name"] == s.group)
        {
            Some(i) => &mut items[i],
            None => {
                items.push(json!({"metadata": {"name": s.group, "creationTimestamp": null}, "versions": []}));
                items.last_mut().expect("just pushed")
            }
        };
        let versions = item["versions"].as_array_mut().expect("versions is a list");
        if !versions.iter().any(|v| v["version"] == s.version) {
            versions.push(json!({"version": s.version, "resources": [], "freshness": "Stale"}));
        }
    }
    for item in &mut items {
        let name = item["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(vs) = item["versions"].as_array_mut() {
            order_versions(&name, vs, services);
        }
    }
    order_groups(
        &mut items,
        |i| i["metadata"]["name"].as_str().unwrap_or_default(),
        services,
        local,
    );
    doc["items"] = Value::Array(items);
}

/// The OpenAPI v3 root (`/openapi/v3`) with each APIService backend's group and version, whose
/// document the backend serves (the request is forwarded).
pub fn add_openapi_paths(doc: &mut Value, services: &[ApiService]) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for s in services.iter().filter(|s| s.backend.is_some()) {
        let key = format!("apis/{}/{}", s.group, s.version);
        let url = format!("/openapi/v3/{key}");
        paths.insert(key, json!({"serverRelativeURL": url}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::aggregation::registry::parse;
    use gpustack_kube_rest::discovery;

    fn service(group: &str, version: &str, gp: i64, vp: i64) -> ApiService {
        parse(
            &json!({"metadata": {"name": format!("{version}.{group}")}, "spec": {
            "group": group, "version": version, "groupPriorityMinimum": gp, "versionPriority": vp,
            "service": {"namespace": "ns", "name": "svc"}}}),
        )
        .unwrap()
    }

    fn backend_list() -> Value {
        json!({"kind": "APIResourceList", "groupVersion": "example.com/v1", "resources": [
            {"name": "things", "singularName": "thing", "namespaced": true, "kind": "Thing",
             "verbs": ["get", "list", "watch"], "shortNames": ["th"]},
            {"name": "things/status", "namespaced": true, "kind": "Thing", "verbs": ["get"]}]})
    }

    #[test]
    fn backend_kinds_become_definitions() {
        let defs = defs_of(&backend_list(), "example.com", "v1");
        assert_eq!(defs.len(), 1);
        let d = &defs[0];
        assert_eq!(
            (d.plural.as_str(), d.kind.as_str(), d.namespaced),
            ("things", "Thing", true)
        );
        assert_eq!(d.short_names, ["th"]);
        assert_eq!(d.subresources[0].name, "status");
        let doc = discovery::resource_list(&defs, "example.com", "v1").unwrap();
        assert_eq!(doc["resources"][1]["name"], "things/status");
    }

    #[test]
    fn versions_sort_as_kubernetes_sorts_them() {
        let mut v = vec![
            "v1alpha1", "foo", "v2beta1", "v1", "v1beta2", "v2", "v1beta1",
        ];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            [
                "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }

    #[test]
    fn groups_and_versions_follow_priorities() {
        let local = crate::registry::builtins();
        let services = [
            service("example.com", "v1", 100, 100),
            service("example.com", "v2", 100, 10),
            service("urgent.example.com", "v1", 20000, 1),
        ];
        let mut doc = discovery::group_list(&local);
        arrange_group_list(&mut doc, &services, &local);
        let names: Vec<&str> = doc["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.first(), Some(&"urgent.example.com"));
        assert_eq!(names.last(), Some(&"example.com"));
        let example = doc["groups"].as_array().unwrap().last().unwrap();
        // v1's versionPriority beats v2's.
        assert_eq!(example["preferredVersion"]["version"], "v1");
        assert_eq!(example["versions"][1]["groupVersion"], "example.com/v2");

        let g = arrange_group_doc(None, "example.com", &services).unwrap();
        assert_eq!(g["preferredVersion"]["groupVersion"], "example.com/v1");
        assert!(arrange_group_doc(None, "nope.example.com", &services).is_none());

        let mut defs = local.clone();
        defs.extend(defs_of(&backend_list(), "example.com", "v1"));
        let mut v2 = discovery::aggregated(&defs, false, "v2");
        arrange_aggregated(&mut v2, &services, &local);
        let items = v2["items"].as_array().unwrap();
        assert_eq!(items[0]["metadata"]["name"], "urgent.example.com");
        assert_eq!(items[0]["versions"][0]["freshness"], "Stale");
        let example = items.last().unwrap();
        assert_eq!(example["versions"][0]["version"], "v1");
        assert_eq!(example["versions"][0]["resources"][0]["resource"], "things");
        assert_eq!(example["versions"][1]["resources"], json!([]));

        let mut root = json!({"paths": {"api/v1": {}}});
        add_openapi_paths(&mut root, &services);
        assert_eq!(
            root["paths"]["apis/example.com/v2"]["serverRelativeURL"],
            "/openapi/v3/apis/example.com/v2"
        );
    }
}
