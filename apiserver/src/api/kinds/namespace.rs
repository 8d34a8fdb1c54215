//! Namespaces: named as DNS labels, `Active` from creation, seeded with what every namespace
//! holds ([`crate::api::cluster_defaults`]); a delete makes one `Terminating`, and it goes
//! once nothing is left in it. The lifecycle every namespaced write follows is here too: no new
//! content in a namespace that is missing or terminating, and the last object of a terminating
//! namespace lets it go.

use serde_json::{Value, json};

use super::strategy::{Committed, Hook, KindStrategy, Write};
use crate::api::{
    Core, cluster_defaults,
    objects::{KindRules, Names, finalizers_of, is_deleting, name_of},
    status::ApiError,
    store_error::store_error,
};
use crate::registry::ResourceDef;
use crate::store::{ObjectKey, Precondition, StoreError, WriteOp};

pub(super) struct Namespace;

impl KindRules for Namespace {
    fn names(&self) -> Names {
        Names::Label
    }
}

impl KindStrategy for Namespace {
    fn prepare_for_create<'a>(&'a self, _w: &'a Write<'a>, obj: &'a mut Value) -> Hook<'a> {
        obj["status"] = json!({"phase": "Active"});
        super::strategy::done()
    }

    fn after_commit<'a>(
        &'a self,
        w: &'a Write<'a>,
        key: &'a ObjectKey,
        change: Committed<'a>,
    ) -> Hook<'a> {
        match change {
            Committed::Created(_) => Box::pin(async move {
                cluster_defaults::seed_namespace(
                    &w.core.store,
                    &w.ctx.cluster,
                    &key.name,
                    &w.core.root_ca_pem,
                )
                .await
                .map_err(store_error)
            }),
            _ => super::strategy::done(),
        }
    }

    fn holds_objects(&self) -> bool {
        true
    }

    fn terminating(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Terminating"});
    }
}

/// The key of namespace `ns` of `cluster`.
pub(crate) fn key(cluster: &str, ns: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.into(),
        group: String::new(),
        resource: RESOURCE.into(),
        namespace: String::new(),
        name: ns.into(),
    }
}

/// The namespaces' resource.
const RESOURCE: &str = "namespaces";

/// Refuses new content in namespace `ns` of `cluster` when it is missing (404) or being
/// terminated (403), as kube-apiserver's namespace lifecycle does. The namespaces are read
/// from the kept copy ([`crate::api::stored_kinds`]), current as of the last commit: a create
/// then visits the store once, to commit.
pub(crate) async fn accepts_content(core: &Core, cluster: &str, ns: &str) -> Result<(), ApiError> {
    let namespaces = core
        .kinds
        .list(cluster, "", RESOURCE)
        .await
        .map_err(store_error)?;
    match namespaces.iter().find(|n| name_of(n) == ns) {
        None => Err(ApiError::not_found("", RESOURCE, ns)),
        Some(n) if is_deleting(n) => Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// The namespaced resources of `cluster`, once per stored collection.
pub(crate) fn namespaced_collections(core: &Core, cluster: &str) -> Vec<ResourceDef> {
    core.registry
        .all(cluster)
        .into_iter()
        .filter(|d| d.namespaced && d.storage_group == d.group)
        .collect()
}

/// Whether namespace `ns` of `cluster` holds nothing.
pub(crate) async fn is_empty(core: &Core, cluster: &str, ns: &str) -> Result<bool, ApiError> {
    for def in namespaced_collections(core, cluster) {
        let page = core
            .store
            .list_raw(cluster, &def.storage_group, &def.plural, Some(ns), None, 1)
            .await
            .map_err(store_error)?;
        if !page.items.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Removes namespace `ns` if it is terminating, has no finalizers and holds nothing any more.
pub(crate) async fn finish_if_empty(core: &Core, cluster: &str, ns: &str) -> Result<(), ApiError> {
    let key = key(cluster, ns);
    let Some((rv, namespace)) = core.store.get(&key).await.map_err(store_error)? else {
        return Ok(());
    };
    if !is_deleting(&namespace)
        || finalizers_of(&namespace) > 0
        || !is_empty(core, cluster, ns).await?
    {
        return Ok(());
    }
    match core
        .store
        .commit(&key, Precondition::At(rv), WriteOp::Delete(namespace))
        .await
    {
        Ok(_) | Err(StoreError::NotFound) | Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(store_error(e)),
    }
}

/// How many stored namespaces are read at a time when looking for terminating ones.
const PAGE: usize = 500;

/// The namespaces of `cluster` marked for deletion.
pub(crate) async fn terminating(core: &Core, cluster: &str) -> Result<Vec<String>, ApiError> {
    let mut names = Vec::new();
    core.store
        .scan_raw(cluster, "", RESOURCE, PAGE, |raw| {
            // Only namespaces that say they are being deleted are parsed.
            if raw.body.contains("deletionTimestamp")
                && serde_json::from_str::<Value>(&raw.body).is_ok_and(|ns| is_deleting(&ns))
            {
                names.push(raw.name.clone());
            }
        })
        .await
        .map_err(store_error)?;
    Ok(names)
}

/// A kind of which every namespace holds an object (its `default` ServiceAccount, its
/// `kube-root-ca.crt` ConfigMap): a real cluster's controllers put it back once deleted (or,
/// for the CA, changed), so the server does at once.
pub(super) struct KeptInEveryNamespace;

impl KindRules for KeptInEveryNamespace {}

impl KindStrategy for KeptInEveryNamespace {
    fn after_commit<'a>(
        &'a self,
        w: &'a Write<'a>,
        key: &'a ObjectKey,
        change: Committed<'a>,
    ) -> Hook<'a> {
        match change {
            Committed::Created(_) => super::strategy::done(),
            Committed::Updated(_) | Committed::Deleted => Box::pin(restore_defaults(w, key)),
        }
    }
}

/// Puts back the object at `key` of `w`'s kind in a namespace not on its way out, when it is
/// one every namespace holds.
async fn restore_defaults(w: &Write<'_>, key: &ObjectKey) -> Result<(), ApiError> {
    if !cluster_defaults::kept_in_every_namespace(&w.def.plural, &key.name) {
        return Ok(());
    }
    match w
        .core
        .store
        .get(&self::key(&w.ctx.cluster, &key.namespace))
        .await
        .map_err(store_error)?
    {
        Some((_, ns)) if !is_deleting(&ns) => {}
        _ => return Ok(()),
    }
    cluster_defaults::seed_namespace(
        &w.core.store,
        &w.ctx.cluster,
        &key.namespace,
        &w.core.root_ca_pem,
    )
    .await
    .map_err(store_error)
}
