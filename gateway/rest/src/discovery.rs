//! Legacy discovery documents: `/version`, `/api`, `/apis`, `/apis/G`, `/apis/G/V` and `/api/v1`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resource::ResourceDef;

/// What `/version` says: the server decides (an embedded cluster and an extension API server
/// name themselves differently).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerVersion {
    /// The major version (`1`).
    pub major: String,
    /// The minor version (`33`).
    pub minor: String,
    /// `v1.33.0+...`: what `kubectl version` prints.
    pub git_version: String,
}

impl ServerVersion {
    /// The `/version` document.
    pub fn to_json(&self) -> Value {
        json!({
            "major": self.major,
            "minor": self.minor,
            "gitVersion": self.git_version,
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "rust",
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        })
    }
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

/// Groups (other than core) with their served versions, preferred first.
fn groups(defs: &[ResourceDef]) -> BTreeMap<&str, Vec<&str>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for d in defs.iter().filter(|d| !d.group.is_empty()) {
        let versions = out.entry(&d.group).or_default();
        for v in &d.versions {
            if !versions.contains(&v.as_str()) {
                versions.push(v);
            }
        }
    }
    out
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(defs: &[ResourceDef]) -> Value {
    let groups: Vec<Value> = groups(defs).iter().map(|(n, v)| group_doc(n, v)).collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/G`, or `None` when no kind of that group is served.
pub fn group(defs: &[ResourceDef], name: &str) -> Option<Value> {
    let groups = groups(defs);
    let versions = groups.get(name)?;
    let mut doc = group_doc(name, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/apis/G/V` or `/api/v1`, or `None` when nothing is served there.
pub fn resource_list(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.serves(version))
    {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        for sub in &d.subresources {
            let mut r = json!({
                "name": format!("{}/{}", d.plural, sub.name),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": sub.verbs,
            });
            // Another kind's group and version are named (`kubectl drain` looks for the
            // Eviction's); the core group has no name to give.
            if let Some(k) = &sub.kind {
                r["kind"] = json!(k.kind);
                if !k.group.is_empty() {
                    r["group"] = json!(k.group);
                    r["version"] = json!(k.version);
                }
            }
            resources.push(r);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources }),
    )
}

/// The aggregated (`apidiscovery.k8s.io`) document of `/api` (`core`) or `/apis`.
pub fn aggregated(defs: &[ResourceDef], core: bool, version: &str) -> Value {
    let mut items = Vec::new();
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_owned()])]
    } else {
        groups(defs)
            .into_iter()
            .map(|(g, vs)| (g.to_owned(), vs.into_iter().map(String::from).collect()))
            .collect()
    };
    for (group, versions) in groups {
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                let resources: Vec<Value> = defs
                    .iter()
                    .filter(|d| d.group == group && d.serves(v))
                    .map(|d| {
                        let kind = json!({"group": d.group, "version": v, "kind": d.kind});
                        let mut r = json!({
                            "resource": d.plural,
                            "responseKind": kind,
                            "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": d.singular,
                            "verbs": d.verbs,
                        });
                        if !d.short_names.is_empty() {
                            r["shortNames"] = json!(d.short_names);
                        }
                        if !d.categories.is_empty() {
                            r["categories"] = json!(d.categories);
                        }
                        if !d.subresources.is_empty() {
                            let subs: Vec<Value> = d
                                .subresources
                                .iter()
                                .map(|s| {
                                    let kind = match &s.kind {
                                        Some(k) => json!({"group": k.group, "version": k.version, "kind": k.kind}),
                                        None => kind.clone(),
                                    };
                                    json!({"subresource": s.name, "responseKind": kind, "verbs": s.verbs})
                                })
                                .collect();
                            r["subresources"] = Value::Array(subs);
                        }
                        r
                    })
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        let mut meta = json!({"creationTimestamp": null});
        if !group.is_empty() {
            meta["name"] = json!(group);
        }
        items.push(json!({"metadata": meta, "versions": versions}));
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtins;

    #[test]
    fn core_list_has_status_subresources_and_short_names() {
        let defs = builtins();
        let doc = resource_list(&defs, "", "v1").unwrap();
        assert_eq!(doc["groupVersion"], "v1");
        let res = doc["resources"].as_array().unwrap();
        let pods = res.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["namespaced"], true);
        assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
        let status = res.iter().find(|r| r["name"] == "nodes/status").unwrap();
        assert_eq!(status["verbs"], json!(["get", "patch", "update"]));
        assert!(res.iter().all(|r| r["name"] != "configmaps/status"));
    }

    #[test]
    fn subresources_of_another_kind_name_it() {
        let defs = builtins();
        let core = resource_list(&defs, "", "v1").unwrap();
        let named = |doc: &Value, n: &str| {
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == n)
                .cloned()
                .unwrap_or_else(|| panic!("{n} is listed"))
        };
        // What `kubectl drain` looks for before it evicts.
        let eviction = named(&core, "pods/eviction");
        assert_eq!(
            (&eviction["group"], &eviction["version"], &eviction["kind"]),
            (&json!("policy"), &json!("v1"), &json!("Eviction"))
        );
        assert_eq!(eviction["verbs"], json!(["create"]));
        let binding = named(&core, "pods/binding");
        assert_eq!(binding["kind"], "Binding");
        assert!(binding.get("group").is_none());
        let apps = resource_list(&defs, "apps", "v1").unwrap();
        let scale = named(&apps, "deployments/scale");
        assert_eq!(
            (&scale["group"], &scale["kind"], &scale["verbs"]),
            (
                &json!("autoscaling"),
                &json!("Scale"),
                &json!(["get", "patch", "update"])
            )
        );
        let agg = aggregated(&defs, false, "v2");
        let deployments = agg["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["metadata"]["name"] == "apps")
            .flat_map(|g| g["versions"][0]["resources"].as_array().unwrap().clone())
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        let scale = deployments["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "scale")
            .unwrap();
        assert_eq!(
            scale["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
    }

    #[test]
    fn aggregated_documents() {
        let defs = builtins();
        let core = aggregated(&defs, true, "v2");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        let v1 = &core["items"][0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        let pods = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["responseKind"]["kind"], "Pod");
        assert_eq!(pods["subresources"][0]["subresource"], "status");
        let apis = aggregated(&defs, false, "v2");
        let names: Vec<&str> = apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"coordination.k8s.io") && !names.contains(&""));
    }

    #[test]
    fn groups_and_versions() {
        let defs = builtins();
        let list = group_list(&defs);
        let names: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"apiextensions.k8s.io"));
        assert!(!names.contains(&""));
        let g = group(&defs, "coordination.k8s.io").unwrap();
        assert_eq!(
            g["preferredVersion"]["groupVersion"],
            "coordination.k8s.io/v1"
        );
        assert!(group(&defs, "nope.example.com").is_none());
        assert!(resource_list(&defs, "coordination.k8s.io", "v2").is_none());
    }
}

#[cfg(test)]
mod read_only_tests {
    use super::*;
    use crate::resource::builtins;

    /// A mirror serves reads only, and its discovery says so (kubectl then never tries a write
    /// it would refuse).
    #[test]
    fn a_read_only_server_lists_no_write_verbs() {
        let defs = crate::resource::read_only(builtins());
        let reads = json!(["get", "list", "watch"]);
        let core = resource_list(&defs, "", "v1").unwrap();
        for r in core["resources"].as_array().unwrap() {
            let name = r["name"].as_str().unwrap();
            if name.contains('/') {
                assert_eq!(r["verbs"], json!(["get"]), "{name}");
            } else {
                assert_eq!(r["verbs"], reads, "{name}");
            }
        }
        let apis = aggregated(&defs, false, "v2");
        for group in apis["items"].as_array().unwrap() {
            for r in group["versions"][0]["resources"].as_array().unwrap() {
                let verbs = r["verbs"].as_array().unwrap();
                assert!(
                    verbs.iter().all(|v| reads.as_array().unwrap().contains(v)),
                    "{r}"
                );
                for sub in r["subresources"].as_array().into_iter().flatten() {
                    assert_eq!(sub["verbs"], json!(["get"]), "{r}");
                }
            }
        }
        // Reviews are create-only: a read-only server offers nothing of them.
        assert!(resource_list(&defs, "authorization.k8s.io", "v1").is_none());
    }
}
