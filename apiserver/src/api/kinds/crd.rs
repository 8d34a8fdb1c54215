//! CustomResourceDefinitions: a definition must describe a kind ([`registry::from_crd`]); it
//! is `Established` at once, its kind registered once it is stored (and again on each update
//! that commits), and unregistered with its objects removed when it goes.

use serde_json::{Value, json};

use super::strategy::{Committed, Hook, KindStrategy, Write, done};
use crate::api::{
    objects::{KindRules, name_of, rfc3339, rv_of},
    status::ApiError,
    store_error::store_error,
};
use crate::registry::{self, ResourceDef};
use crate::store::{ObjectKey, Precondition, StoreError, WriteOp};

pub(super) struct Crd;

/// The kind `crd` defines, or the 422 that refuses it.
fn defined(crd: &Value) -> Result<ResourceDef, ApiError> {
    registry::from_crd(crd)
        .map_err(|m| ApiError::invalid("CustomResourceDefinition", name_of(crd), m.0))
}

impl KindRules for Crd {}

impl KindStrategy for Crd {
    fn prepare_for_create<'a>(&'a self, w: &'a Write<'a>, obj: &'a mut Value) -> Hook<'a> {
        if let Err(e) = defined(obj) {
            return Box::pin(std::future::ready(Err(e)));
        }
        obj["status"] = established_status(obj, w.now);
        done()
    }

    fn validate(
        &self,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<crate::api::field_errors::FieldError> {
        crate::api::cel_rules_crd::crd_problems(obj, old)
    }

    /// The kind changes only once its new definition is committed; the main endpoint keeps the
    /// status.
    fn prepare_for_update(
        &self,
        current: &Value,
        new: &mut Value,
        status: bool,
    ) -> Result<(), ApiError> {
        defined(new)?;
        if !status && let Some(s) = current.get("status") {
            new["status"] = s.clone();
        }
        Ok(())
    }

    fn after_commit<'a>(
        &'a self,
        w: &'a Write<'a>,
        key: &'a ObjectKey,
        change: Committed<'a>,
    ) -> Hook<'a> {
        match change {
            Committed::Created(obj) | Committed::Updated(obj) => {
                register(w, &key.name, obj);
                done()
            }
            Committed::Deleted => Box::pin(forget(w, &key.name)),
        }
    }
}

/// Unregisters the kind of CRD `name`, gone, and removes its objects.
async fn forget(w: &Write<'_>, name: &str) -> Result<(), ApiError> {
    let cluster = &w.ctx.cluster;
    let Some(def) = w
        .core
        .registry
        .all(cluster)
        .into_iter()
        .find(|d| d.custom && format!("{}.{}", d.plural, d.group) == name)
    else {
        return Ok(());
    };
    w.core.registry.unregister(cluster, name);
    delete_all_of(w, &def).await
}

/// Registers the kind of the stored CRD `obj` (named `name`), checked before it was stored.
fn register(w: &Write<'_>, name: &str, obj: &Value) {
    if let Ok(def) = registry::from_crd(obj) {
        w.core.registry.register(&w.ctx.cluster, name, def);
    }
}

/// Removes every object of `def`, the kind of a CRD that went: regardless of finalizers, as
/// objects of a removed kind go.
async fn delete_all_of(w: &Write<'_>, def: &ResourceDef) -> Result<(), ApiError> {
    let cluster = &w.ctx.cluster;
    let page = w
        .core
        .store
        .list(cluster, &def.storage_group, &def.plural, None, None, 0)
        .await
        .map_err(store_error)?;
    for obj in page.items {
        let key = ObjectKey {
            cluster: cluster.clone(),
            group: def.storage_group.clone(),
            resource: def.plural.clone(),
            namespace: obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name: name_of(&obj).to_owned(),
        };
        let rv: u64 = rv_of(&obj).and_then(|r| r.parse().ok()).unwrap_or(0);
        match w
            .core
            .store
            .commit(&key, Precondition::At(rv), WriteOp::Delete(obj))
            .await
        {
            Ok(_) | Err(StoreError::NotFound) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(store_error(e)),
        }
    }
    Ok(())
}

/// The status a CRD gets when its kind is registered.
fn established_status(crd: &Value, now: jiff::Timestamp) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let versions: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"] == json!(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    let t = rfc3339(now);
    json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": t},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": t},
        ],
        "storedVersions": versions,
    })
}
