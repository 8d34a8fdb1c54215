//! Owners and dependents as the garbage collector sees them: the collector's finalizers, an
//! owner to work on, and the lookups from a dependent's owner references to stored owners
//! (and back). Reads only: the writes are in [`super::commit`], the passes in [`super::gc`].

use super::target::*;

/// The finalizer of an owner waiting for its blocking dependents to go.
pub(super) const FOREGROUND: &str = "foregroundDeletion";

/// The finalizer of an owner waiting for its dependents to be orphaned.
pub(super) const ORPHAN: &str = "orphan";

/// An owner the collector works on.
pub(super) struct Owner {
    pub cluster: String,
    pub def: ResourceDef,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// The owner `obj` of kind `def` in `cluster`.
    pub fn of(cluster: &str, def: &ResourceDef, obj: &Value) -> Self {
        Owner {
            cluster: cluster.to_owned(),
            def: def.clone(),
            namespace: obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .map(String::from),
            name: name_of(obj).to_owned(),
            uid: uid_of(obj).to_owned(),
        }
    }

    pub(super) fn target(&self) -> Target {
        Target::stored_form(&self.def, self.namespace.clone())
    }
}

pub(super) fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(super) fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|fs| fs.iter().any(|f| f.as_str() == Some(finalizer)))
}

/// Adds `finalizer` to `obj`; whether it was missing.
pub(super) fn add_finalizer(obj: &mut Value, finalizer: &str) -> bool {
    if has_finalizer(obj, finalizer) {
        return false;
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    let meta = &mut obj["metadata"];
    match meta.get_mut("finalizers").and_then(Value::as_array_mut) {
        Some(fs) => fs.push(json!(finalizer)),
        None => meta["finalizers"] = json!([finalizer]),
    }
    true
}

pub(super) fn without_finalizer(obj: &Value, finalizer: &str) -> Value {
    let mut new = obj.clone();
    if let Some(fs) = new
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    {
        fs.retain(|f| f.as_str() != Some(finalizer));
    }
    new
}

/// Whether `dependent` holds back the foreground deletion of the owner `owner_uid`.
pub(super) fn blocks(dependent: &Value, owner_uid: &str) -> bool {
    dependent
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(owner_uid)
                    && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
            })
        })
}

/// The served kind an owner reference names.
pub(super) fn owner_def(core: &Core, cluster: &str, reference: &Value) -> Option<ResourceDef> {
    let api_version = reference.get("apiVersion").and_then(Value::as_str)?;
    let kind = reference.get("kind").and_then(Value::as_str)?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    core.registry
        .all(cluster)
        .into_iter()
        .find(|d| d.group == group && d.kind == kind && d.serves(version))
}

/// The owner an ownerReference `r` of a dependent in `namespace` names, if it exists with the
/// reference's uid (an owner recreated under its name is another owner).
pub(super) async fn referenced_owner(
    core: &Core,
    ctx: &Ctx,
    namespace: Option<&str>,
    r: &Value,
) -> Result<Option<(Target, Value)>, ApiError> {
    let (Some(def), Some(name), Some(uid)) = (
        owner_def(core, &ctx.cluster, r),
        r.get("name").and_then(Value::as_str),
        r.get("uid").and_then(Value::as_str),
    ) else {
        return Ok(None);
    };
    let t = Target::stored_form(&def, namespace.filter(|_| def.namespaced).map(String::from));
    let owner = core
        .store
        .get(&t.key(&ctx.cluster, name))
        .await
        .map_err(store_error)?;
    Ok(owner.filter(|(_, o)| uid_of(o) == uid).map(|(_, o)| (t, o)))
}

/// Whether `dependent` names an owner other than `gone_uid` that still exists.
pub(super) async fn another_owner_remains(
    core: &Core,
    ctx: &Ctx,
    dependent: &Value,
    gone_uid: &str,
) -> Result<bool, ApiError> {
    let refs = dependent
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let namespace = dependent
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty());
    for r in refs {
        if r.get("uid").and_then(Value::as_str) == Some(gone_uid) {
            continue;
        }
        if referenced_owner(core, ctx, namespace, r).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The dependents of `owner_uid`, with the target to address each.
pub(super) async fn dependents(
    core: &Core,
    ctx: &Ctx,
    owner_uid: &str,
) -> Result<Vec<(Target, String)>, ApiError> {
    let keys = core
        .store
        .dependents(&ctx.cluster, owner_uid)
        .await
        .map_err(store_error)?;
    Ok(keys
        .into_iter()
        .filter_map(|key| {
            let def = core
                .registry
                .find_stored(&ctx.cluster, &key.group, &key.resource)?;
            let namespace = (!key.namespace.is_empty()).then_some(key.namespace);
            Some((Target::stored_form(&def, namespace), key.name))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizers_and_blocking_references() {
        let mut o = json!({"metadata": {"name": "o"}});
        assert!(add_finalizer(&mut o, FOREGROUND));
        assert!(!add_finalizer(&mut o, FOREGROUND));
        assert!(add_finalizer(&mut o, "x/y"));
        assert_eq!(o["metadata"]["finalizers"], json!([FOREGROUND, "x/y"]));
        assert!(has_finalizer(&o, "x/y") && !has_finalizer(&o, ORPHAN));
        assert_eq!(
            without_finalizer(&o, FOREGROUND)["metadata"]["finalizers"],
            json!(["x/y"])
        );
        let d = json!({"metadata": {"ownerReferences": [
            {"uid": "a", "blockOwnerDeletion": true},
            {"uid": "b"}
        ]}});
        assert!(blocks(&d, "a"));
        assert!(!blocks(&d, "b"));
        assert!(!blocks(&d, "c"));
    }
}
