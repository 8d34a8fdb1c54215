//! What every verb shares: the resolved [`Target`] of a request, the request options all of
//! them read (representation, dry run, field validation), the namespace and selectors of a read
//! ([`Filter`]), and the vocabulary the verbs are written in. The verbs import this module, never
//! the dispatcher ([`super`]) that imports them.

pub(super) use axum::{
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
pub(super) use serde_json::{Value, json};

pub(super) use crate::api::{
    Core, Ctx, Writes, apply, conversion, json_response,
    kinds::{self, Committed, KindStrategy},
    negotiate,
    negotiate::Representation,
    objects::{self, finalizers_of, is_deleting, name_of, name_suffix, new_uid, rv_of},
    pagination::Continue,
    patch::{self, PatchError, PatchKind},
    schema::{self, FieldValidation},
    selectors::{FieldSelector, LabelSelector, labels_of},
    status::ApiError,
    table::{self, IncludeObject},
};
pub(super) use crate::registry::ResourceDef;
pub(super) use crate::store::{ObjectKey, Precondition, StoreError, WriteOp};
use gpustack_kube_rest::builtin_schemas;

/// How many times a write without a client-given resourceVersion retries after losing a race.
pub(super) const WRITE_ATTEMPTS: usize = 16;

/// A resolved resource request.
pub(crate) struct Target {
    pub def: ResourceDef,
    /// What is special about the kind, resolved with the target.
    pub kind: &'static dyn KindStrategy,
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

impl Target {
    /// The target `name` (or the collection) of `def` at `version` in `namespace`, its
    /// `/status` when `status`.
    pub(crate) fn new(
        def: ResourceDef,
        version: String,
        namespace: Option<String>,
        name: Option<String>,
        status: bool,
    ) -> Self {
        Target {
            kind: kinds::of(&def),
            def,
            version,
            namespace,
            name,
            status,
        }
    }

    /// The target of every object of `def` in `namespace`, at its storage version.
    pub(super) fn stored_form(def: &ResourceDef, namespace: Option<String>) -> Self {
        Target::new(def.clone(), def.versions[0].clone(), namespace, None, false)
    }

    /// How a hook sees a write to this target by `ctx`.
    pub(super) fn write<'a>(
        &'a self,
        core: &'a Core,
        ctx: &'a Ctx,
        now: jiff::Timestamp,
    ) -> kinds::Write<'a> {
        kinds::Write {
            core,
            ctx,
            def: &self.def,
            now,
        }
    }

    /// The served form of stored `obj`, at this target's version.
    pub(crate) fn served(&self, obj: Value) -> Value {
        at_version(&self.def, self.kind, &self.version, obj)
    }

    /// The stored form of `obj`, given in this target's form.
    pub(super) fn to_storage(&self, obj: Value) -> Value {
        conversion::to_storage(&self.def, self.kind, obj)
    }

    pub(super) fn key(&self, cluster: &str, name: &str) -> ObjectKey {
        ObjectKey {
            cluster: cluster.to_owned(),
            group: self.def.storage_group.clone(),
            resource: self.def.plural.clone(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_owned(),
        }
    }

    /// The stored object `name` of this kind and its resourceVersion; 404 naming it when
    /// there is none.
    pub(super) async fn stored(
        &self,
        core: &Core,
        cluster: &str,
        name: &str,
    ) -> Result<(u64, Value), ApiError> {
        core.store
            .get(&self.key(cluster, name))
            .await
            .map_err(store_error)?
            .ok_or_else(|| ApiError::not_found(&self.def.group, &self.def.plural, name))
    }
}

pub(crate) use crate::api::store_error::store_error;

/// Sets the `apiVersion` a client asked for (objects are stored once per group and resource),
/// with the defaults a custom kind's schema gained since the object was stored.
pub(crate) fn at_version(
    def: &ResourceDef,
    kind: &dyn KindStrategy,
    version: &str,
    obj: Value,
) -> Value {
    let mut obj = conversion::from_storage(kind, obj);
    if let Some(s) = def.custom_schema() {
        schema::apply_defaults(s, &mut obj);
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(def.api_version(version)));
    }
    obj
}

pub(super) fn representation(ctx: &Ctx) -> Result<Representation, ApiError> {
    let accept = ctx.header(header::ACCEPT);
    // Answered as JSON here, turned into protobuf by the dispatcher (`as_protobuf`).
    if negotiate::protobuf_only(accept) {
        return Ok(Representation::Json);
    }
    negotiate::for_resource(accept, true).ok_or_else(|| ApiError::not_acceptable(accept))
}

pub(super) fn include_object(ctx: &Ctx) -> Result<IncludeObject, ApiError> {
    IncludeObject::parse(ctx.param("includeObject")).map_err(ApiError::bad_request)
}

pub(super) fn dry_run(ctx: &Ctx) -> Result<bool, ApiError> {
    match ctx.param("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}

pub(super) fn check_field_validation(ctx: &Ctx) -> Result<FieldValidation, ApiError> {
    FieldValidation::parse(ctx.param("fieldValidation")).map_err(ApiError::bad_request)
}

/// Applies a custom kind's schema defaults and prunes what the kind's schema (a CRD's, or a
/// built-in kind's definitions) does not define, refusing (`Strict`) or warning about (`Warn`)
/// it as the request asked. `current` is the object an update starts from: unknown fields it
/// already held (written before its kind had a schema) go without being reported.
pub(super) fn apply_schema(
    ctx: &Ctx,
    t: &Target,
    obj: &mut Value,
    current: Option<&Value>,
) -> Result<(), ApiError> {
    let mode = check_field_validation(ctx)?;
    // Another kind's body (a subresource's) is not a built-in kind's to prune; known before
    // the shared document is read.
    let other_kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != t.def.kind);
    if !t.def.custom && other_kind {
        return Ok(());
    }
    let Some(schema) = t.def.schema.as_deref() else {
        return Ok(());
    };
    let unknown = if t.def.custom {
        // Defaults first: a default is a field the schema knows, never an unknown one. They
        // may add no more than the object limit leaves.
        use crate::api::validation::{MAX_OBJECT_BYTES, object_too_large};
        let size = schema::json_size(obj, MAX_OBJECT_BYTES).ok_or_else(object_too_large)?;
        if !schema::apply_defaults_within(schema, obj, MAX_OBJECT_BYTES - size) {
            return Err(object_too_large());
        }
        schema::prune(schema, obj)
    } else {
        let Some((_, root)) =
            builtin_schemas::kind_definition(schema, &t.def.group, &t.version, &t.def.kind)
        else {
            return Ok(());
        };
        let mut unknown = schema::prune_with_definitions(schema, root, obj);
        // Fields the stored object already held are not reported: only worth working out
        // when something will be reported.
        if !unknown.is_empty()
            && mode != FieldValidation::Ignore
            && let Some(current) = current
        {
            let before = schema::prune_with_definitions(schema, root, &mut current.clone());
            unknown.retain(|f| !before.contains(f));
        }
        unknown
    };
    if unknown.is_empty() {
        return Ok(());
    }
    let messages = unknown.iter().map(|f| format!("unknown field \"{f}\""));
    match mode {
        FieldValidation::Strict => {
            let error = format!(
                "strict decoding error: {}",
                messages.collect::<Vec<_>>().join(", ")
            );
            // A create or update names the kind it could not decode, as kube-apiserver does.
            Err(ApiError::bad_request(
                if matches!(ctx.method, Method::POST | Method::PUT) {
                    format!(
                        "{kind} in version \"{}\" cannot be handled as a {kind}: {error}",
                        t.version,
                        kind = t.def.kind
                    )
                } else {
                    error
                },
            ))
        }
        FieldValidation::Warn => {
            ctx.warn(messages);
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

/// Namespace and selectors of a list or watch.
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// Set when objects are stored in another form: field selectors apply to the served form.
    pub served_as: Option<&'static dyn KindStrategy>,
}

impl Filter {
    pub fn from_ctx(ctx: &Ctx, t: &Target) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(ctx.param("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(
            ctx.param("fieldSelector").unwrap_or(""),
            &t.def.selectable_fields,
        )
        .map_err(ApiError::bad_request)?;
        let served_as = (t.def.storage_group != t.def.group).then_some(t.kind);
        Ok(Filter {
            namespace: t.namespace.clone(),
            labels,
            fields,
            served_as,
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns)
        {
            return false;
        }
        if !self.labels.matches(&labels_of(obj)) {
            return false;
        }
        match &self.served_as {
            Some(kind) => self
                .fields
                .matches(&conversion::from_storage(*kind, obj.clone())),
            None => self.fields.matches(obj),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_look_like_uuids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.matches('-').count(), 4);
        assert_ne!(new_uid(), u);
        assert_eq!(name_suffix().len(), 5);
    }
}
