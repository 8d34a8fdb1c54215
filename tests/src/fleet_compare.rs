//! A mirror against its upstream, object for object: the same names, each with the same uid and
//! the upstream's resourceVersion (which the mirror keeps in an annotation beside its own),
//! nothing missing, nothing extra, nothing listed twice.

use std::collections::BTreeMap;

use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, ListParams},
};

use crate::fleet_load::UPSTREAM_VERSION;

/// One listed object: name, uid, upstream resourceVersion.
pub type Entry = (String, String, u64);

/// An object's uid and upstream resourceVersion.
pub type Version = (String, u64);

/// How a mirror differs from its upstream; empty when it equals it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Difference {
    pub missing: Vec<String>,
    pub extra: Vec<String>,
    pub duplicated: Vec<String>,
    /// name, (uid, version) upstream, (uid, version) in the mirror.
    pub differing: Vec<(String, Version, Version)>,
}

impl Difference {
    pub fn is_empty(&self) -> bool {
        *self == Difference::default()
    }
}

/// Compares the upstream's list with the mirror's.
pub fn compare(upstream: &[Entry], mirror: &[Entry]) -> Difference {
    let want: BTreeMap<&str, (&str, u64)> = upstream
        .iter()
        .map(|(n, u, v)| (n.as_str(), (u.as_str(), *v)))
        .collect();
    let mut got: BTreeMap<&str, (&str, u64)> = BTreeMap::new();
    let mut d = Difference::default();
    for (n, u, v) in mirror {
        if got.insert(n, (u, *v)).is_some() {
            d.duplicated.push(n.clone());
        }
    }
    for (n, (u, v)) in &want {
        match got.get(n) {
            None => d.missing.push((*n).to_owned()),
            Some((gu, gv)) if (gu, gv) != (u, v) => d.differing.push((
                (*n).to_owned(),
                ((*u).to_owned(), *v),
                ((*gu).to_owned(), *gv),
            )),
            Some(_) => {}
        }
    }
    d.extra = got
        .keys()
        .filter(|n| !want.contains_key(*n))
        .map(|n| (*n).to_owned())
        .collect();
    d
}

fn version(v: Option<&String>) -> u64 {
    v.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Every object of `resource` at an upstream, with its own resourceVersions.
pub async fn list_upstream(
    client: &kube::Client,
    resource: &ApiResource,
) -> Result<Vec<Entry>, kube::Error> {
    list(client, resource, |o| {
        version(o.metadata.resource_version.as_ref())
    })
    .await
}

/// Every object of `resource` in a mirror, with the upstream's versions it recorded.
pub async fn list_mirror(
    client: &kube::Client,
    resource: &ApiResource,
) -> Result<Vec<Entry>, kube::Error> {
    list(client, resource, |o| {
        version(o.annotations().get(UPSTREAM_VERSION))
    })
    .await
}

async fn list(
    client: &kube::Client,
    resource: &ApiResource,
    version_of: impl Fn(&DynamicObject) -> u64,
) -> Result<Vec<Entry>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .map(|o| (o.name_any(), o.uid().unwrap_or_default(), version_of(o)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(n: &str, u: &str, v: u64) -> Entry {
        (n.into(), u.into(), v)
    }

    #[test]
    fn equal_lists_differ_in_nothing_and_each_kind_of_difference_is_named() {
        let up = [e("a", "1", 5), e("b", "2", 6), e("c", "3", 7)];
        assert!(compare(&up, &up).is_empty());
        let mirror = [
            e("a", "1", 5),
            e("a", "1", 5),
            e("b", "9", 6),
            e("d", "4", 1),
        ];
        let d = compare(&up, &mirror);
        assert_eq!(d.missing, ["c"]);
        assert_eq!(d.extra, ["d"]);
        assert_eq!(d.duplicated, ["a"]);
        assert_eq!(
            d.differing,
            [("b".to_owned(), ("2".to_owned(), 6), ("9".to_owned(), 6))]
        );
    }
}
