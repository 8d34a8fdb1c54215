//! Writes: create (with `generateName` and the namespace lifecycle), update, patch and
//! server-side apply, the updates all through [`super::commit::guaranteed_update`]. What a kind
//! adds is its strategy's ([`crate::api::kinds`]).

use super::commit::{By, guaranteed_update};
use super::target::*;

/// Creates `body` in `t`'s collection, owned as `op` says; the response object. One fixed
/// pipeline whatever the kind: the server's fields, the mutating webhooks, the kind's
/// preparation, schema, validation and rules, ownership, the validating webhooks, one commit,
/// then what follows it for the kind.
pub(crate) async fn create_object(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    body: Value,
    op: apply::Operation,
) -> Result<Value, ApiError> {
    if t.def.namespaced {
        let ns = t
            .namespace
            .as_deref()
            .ok_or_else(ApiError::not_found_path)?;
        kinds::namespace::accepts_content(&st.core, &ctx.cluster, ns).await?;
    }
    let now = jiff::Timestamp::now();
    let mut obj = objects::prepare_create(
        &t.def,
        t.kind,
        &t.version,
        t.namespace.as_deref(),
        body,
        &new_uid(),
        &name_suffix(),
        now,
    )?;
    let admission = crate::api::admission::attributes(
        ctx,
        &t.def,
        &t.version,
        t.namespace.as_deref(),
        false,
        name_of(&obj),
        crate::api::admission::Operation::Create,
        dry_run(ctx)?,
        None,
    );
    crate::api::admission::mutate(st, ctx, &admission, &mut obj, None).await?;
    let hooks = t.write(&st.core, ctx, now);
    t.kind.prepare_for_create(&hooks, &mut obj).await?;
    apply_schema(ctx, t, &mut obj, None)?;
    let obj = crate::api::validation::validated(&st.core.patterns, &t.def, t.kind, obj, None)?;
    let mut obj = crate::api::cel_rules::check(&st.admission.cel_slots, &t.def, obj, None).await?;
    crate::api::auth::refuse_escalation(
        &st.core,
        &ctx.cluster,
        &ctx.user,
        &t.def.group,
        &t.def.plural,
        &obj,
    )
    .await?;
    let w = writer(ctx, t);
    match op {
        apply::Operation::Update => apply::own_updated(&json!({}), &mut obj, &w, now),
        // Created by apply: the object is the configuration, and nobody else owns anything.
        apply::Operation::Apply => {
            let config = obj.clone();
            apply::own_applied(&json!({}), &mut obj, &config, &w, true, now)
                .map_err(apply::conflict_error)?;
        }
    }
    crate::api::admission::validate(st, ctx, &admission, Some(&obj), None).await?;
    let name = name_of(&obj).to_owned();
    if dry_run(ctx)? {
        return Ok(obj);
    }
    let key = t.key(&ctx.cluster, &name);
    let ev = st
        .core
        .store
        .commit(&key, Precondition::Absent, WriteOp::Put(t.to_storage(obj)))
        .await
        .map_err(|e| match e {
            StoreError::AlreadyExists => {
                ApiError::already_exists(&t.def.group, &t.def.plural, &name)
            }
            e => store_error(e),
        })?;
    t.kind
        .after_commit(&hooks, &key, Committed::Created(&ev.body))
        .await?;
    // The event is the writer's to share; without a watcher holding it, no copy is needed.
    Ok(t.served(std::sync::Arc::unwrap_or_clone(ev.body)))
}

/// Bodies from this size on are decoded on the blocking pool, not on an async worker: a
/// 16 MiB YAML document would otherwise hold the worker, and every request queued behind it.
const DECODE_INLINE_MAX: usize = 64 << 10;

/// Runs `decode` of a body of `size` bytes where it cannot stall other requests.
async fn decode_off_workers<T: Send + 'static>(
    size: usize,
    decode: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    if size < DECODE_INLINE_MAX {
        return decode();
    }
    tokio::task::spawn_blocking(decode)
        .await
        .map_err(|e| ApiError::internal(format!("decoding the request body: {e}")))?
}

/// The body of a create or update: JSON, YAML or protobuf.
pub(super) async fn object_body(ctx: &Ctx) -> Result<Value, ApiError> {
    let ct = ctx.header(header::CONTENT_TYPE).to_owned();
    let body = ctx.body.clone();
    decode_off_workers(body.len(), move || decode_object(&ct, &body)).await
}

fn decode_object(ct: &str, body: &[u8]) -> Result<Value, ApiError> {
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence == gpustack_kube_rest::protobuf::MEDIA_TYPE {
        use crate::api::protobuf::ProtobufError;
        return crate::api::protobuf::decode(body).map_err(|e| match e {
            ProtobufError::UnknownKind { .. } | ProtobufError::ContentEncoding(_) => {
                ApiError::new(415, "UnsupportedMediaType", e.to_string())
            }
            e => ApiError::bad_request(e.to_string()),
        });
    }
    if !matches!(
        essence,
        "" | "application/json" | "application/yaml" | "*/*"
    ) {
        return Err(ApiError::unsupported_media_type(ct));
    }
    patch::parse_body(body).map_err(ApiError::bad_request)
}

/// The most a `fieldManager` may be, in bytes.
const FIELD_MANAGER_MAX: usize = 128;

/// Refuses a `fieldManager` parameter Kubernetes would refuse (`options` names the request's
/// options kind, as its 422 does).
fn check_field_manager(ctx: &Ctx, options: &str) -> Result<(), ApiError> {
    match ctx.param("fieldManager") {
        Some(m) if m.len() > FIELD_MANAGER_MAX => Err(ApiError::invalid(
            &format!("{options}.meta.k8s.io"),
            "",
            format!("fieldManager: Too long: may not be more than {FIELD_MANAGER_MAX} bytes"),
        )),
        _ => Ok(()),
    }
}

/// Who a write is by: the `fieldManager` parameter, else (as Kubernetes does) the product part
/// of the User-Agent, else "unknown".
fn manager_of(ctx: &Ctx) -> String {
    if let Some(m) = ctx.param("fieldManager").filter(|m| !m.is_empty()) {
        return m.to_owned();
    }
    let ua = ctx.header(header::USER_AGENT);
    let product = ua.split('/').next().unwrap_or("").trim();
    if product.is_empty() {
        return "unknown".into();
    }
    let mut end = product.len().min(FIELD_MANAGER_MAX);
    while !product.is_char_boundary(end) {
        end -= 1;
    }
    product[..end].to_owned()
}

/// The writer of a request to `t`, for field ownership.
pub(super) fn writer(ctx: &Ctx, t: &Target) -> apply::Writer {
    apply::Writer {
        manager: manager_of(ctx),
        subresource: t.status.then_some("status"),
        api_version: t.def.api_version(&t.version),
        // Custom kinds merge the lists their schema marks as maps.
        lists: if t.def.custom {
            apply::Lists::Schema(t.def.schema.clone())
        } else {
            apply::Lists::Builtin
        },
        part: if t.status {
            apply::Part::Status
        } else if t.def.status_subresource() {
            apply::Part::AllButStatus
        } else {
            apply::Part::All
        },
    }
}

/// The configuration of an apply patch: an object that leaves managedFields to the server.
async fn applied_config(ctx: &Ctx) -> Result<Value, ApiError> {
    let body = ctx.body.clone();
    let config = decode_off_workers(body.len(), move || {
        patch::parse_body(&body).map_err(ApiError::bad_request)
    })
    .await?;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ));
    }
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    Ok(config)
}

pub(super) async fn create(st: &Writes, ctx: &Ctx, t: &Target) -> Result<Response, ApiError> {
    check_field_validation(ctx)?;
    check_field_manager(ctx, "CreateOptions")?;
    let representation = representation(ctx)?;
    let body = object_body(ctx).await?;
    let obj = create_object(st, ctx, t, body, apply::Operation::Update).await?;
    super::read::answer(ctx, t, representation, StatusCode::CREATED, obj)
}

pub(super) fn pinned_rv_matches(
    t: &Target,
    name: &str,
    given: Option<&str>,
    current: &Value,
) -> Result<(), ApiError> {
    match given {
        Some(rv) if Some(rv) != rv_of(current) => {
            Err(ApiError::conflict(&t.def.group, &t.def.plural, name))
        }
        _ => Ok(()),
    }
}

pub(super) async fn update(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<Response, ApiError> {
    check_field_validation(ctx)?;
    check_field_manager(ctx, "UpdateOptions")?;
    let representation = representation(ctx)?;
    let body = object_body(ctx).await?;
    let given = rv_of(&body).map(String::from);
    let mut body = body;
    // Pruned before generation is worked out: an unknown field is no change.
    apply_schema(ctx, t, &mut body, None)?;
    let w = writer(ctx, t);
    let obj = guaranteed_update(st, ctx, t, name, By::Client, |current| {
        pinned_rv_matches(t, name, given.as_deref(), current)?;
        prepared_update(st, t, current, body.clone()).map(|mut new| {
            apply::own_updated(current, &mut new, &w, jiff::Timestamp::now());
            new
        })
    })
    .await?;
    super::read::answer(ctx, t, representation, StatusCode::OK, obj)
}

/// `new` as an update of `current` would store it: prepared for its kind, then validated.
fn prepared_update(
    st: &Writes,
    t: &Target,
    current: &Value,
    new: Value,
) -> Result<Value, ApiError> {
    objects::prepare_update(&t.def, t.kind, &t.version, current, new, t.status).and_then(|new| {
        crate::api::validation::validated(&st.core.patterns, &t.def, t.kind, new, Some(current))
    })
}

pub(super) async fn patch(
    st: &Writes,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<Response, ApiError> {
    check_field_validation(ctx)?;
    check_field_manager(ctx, "PatchOptions")?;
    let representation = representation(ctx)?;
    let ct = ctx.header(header::CONTENT_TYPE).to_owned();
    let kind =
        PatchKind::from_content_type(&ct).ok_or_else(|| ApiError::unsupported_media_type(&ct))?;
    // Custom kinds have no patch-strategy metadata: a strategic merge patch is a merge patch.
    let kind = match kind {
        PatchKind::StrategicMerge if t.def.custom => PatchKind::Merge,
        k => k,
    };
    // Only an apply can force; Kubernetes refuses the parameter (any value) on other patches.
    if kind != PatchKind::Apply && ctx.param("force").is_some() {
        return Err(ApiError::invalid(
            "PatchOptions.meta.k8s.io",
            "",
            "force: Forbidden: may not be specified for non-apply patch",
        ));
    }
    if kind == PatchKind::Apply {
        if ctx.param("fieldManager").is_none_or(str::is_empty) {
            return Err(ApiError::invalid(
                "PatchOptions.meta.k8s.io",
                "",
                "fieldManager: Required value: is required for apply patch",
            ));
        }
        let key = t.key(&ctx.cluster, name);
        if !t.status
            && st
                .core
                .store
                .get(&key)
                .await
                .map_err(store_error)?
                .is_none()
        {
            let mut body = applied_config(ctx).await?;
            if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                if m.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n != name)
                {
                    return Err(ApiError::bad_request(
                        "the name of the object does not match the name on the URL",
                    ));
                }
                m.insert("name".into(), json!(name));
            } else {
                body["metadata"] = json!({"name": name});
            }
            let obj = create_object(st, ctx, t, body, apply::Operation::Apply).await?;
            return super::read::answer(ctx, t, representation, StatusCode::CREATED, obj);
        }
    }
    let applied = match kind {
        PatchKind::Apply => Some(applied_config(ctx).await?),
        _ => None,
    };
    let w = writer(ctx, t);
    let force = ctx.flag("force");
    let obj = guaranteed_update(st, ctx, t, name, By::Client, |current| {
        let patched = match &applied {
            Some(config) => apply::merge_applied(current, config, &w),
            None => patch::apply(current, kind, &ctx.body).map_err(|e| match e {
                PatchError::TooLarge => crate::api::validation::object_too_large(),
                PatchError::Invalid(m) if kind == PatchKind::Json => {
                    ApiError::new(422, "Invalid", m)
                }
                PatchError::Invalid(m) => ApiError::bad_request(m),
            })?,
        };
        pinned_rv_matches(t, name, rv_of(&patched), current)?;
        let mut patched = patched;
        // Pruned before generation is worked out: an unknown field is no change.
        apply_schema(ctx, t, &mut patched, Some(current))?;
        let mut new = prepared_update(st, t, current, patched)?;
        // Ownership is settled on what will be stored: an apply may conflict here.
        let now = jiff::Timestamp::now();
        match &applied {
            Some(config) => apply::own_applied(current, &mut new, config, &w, force, now)
                .map_err(apply::conflict_error)?,
            None => apply::own_updated(current, &mut new, &w, now),
        }
        Ok(new)
    })
    .await?;
    super::read::answer(ctx, t, representation, StatusCode::OK, obj)
}
