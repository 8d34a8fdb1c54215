//! Reads: get one object, list a collection (verbatim or filtered), page by page.

use super::target::*;
use crate::store::ReplayError;
use gpustack_kube_rest::{list, resource::Schema};

pub(super) async fn get(
    core: &Core,
    ctx: &Ctx,
    t: &Target,
    name: &str,
) -> Result<Response, ApiError> {
    if t.def.namespaced && t.namespace.is_none() {
        return Err(ApiError::not_found_path());
    }
    let representation = representation(ctx)?;
    let (_, obj) = t.stored(core, &ctx.cluster, name).await?;
    let obj = t.served(obj);
    answer(ctx, t, representation, StatusCode::OK, obj)
}

/// One object in the representation the caller asked for: itself, its metadata alone
/// (`as=PartialObjectMetadata`) or a one-row Table. Reads and writes answer alike, as
/// kube-apiserver does; `representation` is negotiated before any work is done.
pub(super) fn answer(
    ctx: &Ctx,
    t: &Target,
    representation: Representation,
    status: StatusCode,
    obj: Value,
) -> Result<Response, ApiError> {
    match representation {
        Representation::Json => Ok(json_response(status, &obj)),
        Representation::Metadata => {
            Ok(json_response(status, &table::partial_object_metadata(&obj)))
        }
        Representation::Table => {
            let rv = rv_of(&obj).unwrap_or("").to_owned();
            Ok(json_response(
                status,
                &table::table(
                    &t.def,
                    &[obj],
                    include_object(ctx)?,
                    json!({"resourceVersion": rv}),
                    jiff::Timestamp::now(),
                ),
            ))
        }
    }
}

/// The matching objects of a collection, one page at a time.
pub(crate) async fn collect(
    core: &Core,
    ctx: &Ctx,
    t: &Target,
    filter: &Filter,
    limit: usize,
    from: Option<Continue>,
) -> Result<(Vec<Value>, u64, Option<Continue>), ApiError> {
    let batch = if limit == 0 { 0 } else { limit.max(500) };
    let mut after = from.as_ref().map(|c| (c.namespace.clone(), c.name.clone()));
    let mut out = Vec::new();
    let mut list_rv = from.as_ref().map(|c| c.rv);
    loop {
        let after_ref = after.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
        let (group, resource, ns) = (&t.def.storage_group, &t.def.plural, t.namespace.as_deref());
        // Later pages (and later batches of this one) read the first page's snapshot.
        let page = match list_rv {
            None => core
                .store
                .list(&ctx.cluster, group, resource, ns, after_ref, batch)
                .await
                .map_err(store_error)?,
            Some(snapshot) => core
                .store
                .list_at(
                    &ctx.cluster,
                    group,
                    resource,
                    ns,
                    after_ref,
                    batch,
                    snapshot,
                )
                .await
                .map_err(replay_error)?,
        };
        let rv = *list_rv.get_or_insert(page.rv);
        let n = page.items.len();
        for (i, obj) in page.items.into_iter().enumerate() {
            let pos = (
                obj.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                name_of(&obj).to_owned(),
            );
            if filter.matches(&obj) {
                out.push(t.served(obj));
                if limit != 0 && out.len() == limit {
                    let more = page.more || i + 1 < n;
                    let next = more.then_some(Continue {
                        rv,
                        namespace: pos.0,
                        name: pos.1,
                    });
                    return Ok((out, rv, next));
                }
            }
            after = Some(pos);
        }
        if !page.more {
            return Ok((out, rv, None));
        }
    }
}

pub(super) async fn list(core: &Core, ctx: &Ctx, t: &Target) -> Result<Response, ApiError> {
    // A list is served at the store's latest state, once the store has reached any version
    // asked. (A mirror's objects carry their upstream's versions: not the store's to compare.)
    if let Some(rv) = crate::api::requested_version::parse(ctx.param("resourceVersion"))?
        && !ctx.read_only
    {
        crate::api::requested_version::reached(&core.store, rv).await?;
    }
    let filter = Filter::from_ctx(ctx, t)?;
    let limit = list::limit(ctx.param("limit"))?;
    let from = list::continue_from(ctx.param("continue"))?;
    let representation = representation(ctx)?;
    let verbatim = representation == Representation::Json
        && filter.labels.0.is_empty()
        && filter.fields.0.is_empty()
        && t.def.storage_group == t.def.group
        && t.def.versions.first() == Some(&t.version);
    if verbatim {
        return list_verbatim(core, ctx, t, limit, from).await;
    }
    let (items, rv, next) = collect(core, ctx, t, &filter, limit, from).await?;
    let include = match representation {
        Representation::Table => include_object(ctx)?,
        _ => IncludeObject::Metadata,
    };
    let body = list::render(
        &t.def,
        &t.version,
        representation,
        include,
        items,
        list::metadata(rv, next.as_ref()),
    );
    Ok(json_response(StatusCode::OK, &body))
}

/// A list whose items are served exactly as stored: the stored JSON texts are spliced into the
/// response without being parsed (the common case, and the one that matters at scale).
pub(super) async fn list_verbatim(
    core: &Core,
    ctx: &Ctx,
    t: &Target,
    limit: usize,
    from: Option<Continue>,
) -> Result<Response, ApiError> {
    let after = from
        .as_ref()
        .map(|c| (c.namespace.as_str(), c.name.as_str()));
    let (group, resource, ns) = (&t.def.storage_group, &t.def.plural, t.namespace.as_deref());
    if limit == 0 && from.is_none() {
        return stream_verbatim(core, ctx, t).await;
    }
    let page = match &from {
        None => core
            .store
            .list_raw(&ctx.cluster, group, resource, ns, after, limit)
            .await
            .map_err(store_error)?,
        Some(c) => core
            .store
            .list_raw_at(&ctx.cluster, group, resource, ns, after, limit, c.rv)
            .await
            .map_err(replay_error)?,
    };
    let rv = from.as_ref().map_or(page.rv, |c| c.rv);
    let next = page
        .items
        .last()
        .filter(|_| page.more)
        .map(|last| Continue {
            rv,
            namespace: last.namespace.clone(),
            name: last.name.clone(),
        });
    let meta = list::metadata(rv, next.as_ref());
    let size: usize = page.items.iter().map(|o| o.body.len() + 1).sum();
    let mut body = String::with_capacity(size + 256);
    body.push_str(&list::verbatim_head(&t.def, &t.version, &meta));
    let defaults = read_defaults(core, ctx, t);
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&with_defaults(defaults.as_deref(), &o.body));
    }
    body.push_str(list::VERBATIM_TAIL);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// The schema whose defaults stored objects of `t` get when read, if any: objects stored before
/// their CRD gained a default lack it (writes apply defaults), so only kinds whose CRD changed
/// since it was created are parsed on the way out. Not for mirrors: their upstream defaulted
/// them.
fn read_defaults(core: &Core, ctx: &Ctx, t: &Target) -> Option<Schema> {
    let mirror = core.served.get(&ctx.cluster).is_some_and(|s| s.read_only);
    t.def
        .schema
        .clone()
        .filter(|_| t.def.custom && t.def.defaults_on_read && !mirror)
}

/// A stored object's text with `schema`'s defaults applied (parsed only when there is a schema
/// with defaults; unchanged text when nothing was missing).
fn with_defaults<'a>(schema: Option<&Value>, text: &'a str) -> std::borrow::Cow<'a, str> {
    let Some(schema) = schema else {
        return text.into();
    };
    let Ok(mut obj) = serde_json::from_str::<Value>(text) else {
        return text.into();
    };
    let before = obj.clone();
    schema::apply_defaults(schema, &mut obj);
    if obj == before {
        text.into()
    } else {
        obj.to_string().into()
    }
}

/// A whole collection, unpaged: streamed from one snapshot as the store reads it, so that the
/// gateway's memory does not grow with the collection (a full list of 100,000 objects of 2 KB
/// would otherwise be held twice, as rows and as the body). Each page the store hands over
/// becomes one chunk of the body, its stored texts spliced in as they are. A storage error after
/// the first bytes ends the body early, and the client sees a truncated list, never a partial
/// one it could mistake for complete.
async fn stream_verbatim(core: &Core, ctx: &Ctx, t: &Target) -> Result<Response, ApiError> {
    use futures::StreamExt;
    let (group, resource, ns) = (&t.def.storage_group, &t.def.plural, t.namespace.as_deref());
    let defaults = read_defaults(core, ctx, t);
    if defaults.is_none() {
        // Nothing to change in the stored texts: each page arrives as one text.
        let (rv, pages) = core
            .store
            .stream_text(&ctx.cluster, group, resource, ns)
            .await
            .map_err(store_error)?;
        let items = tokio_stream::wrappers::ReceiverStream::new(pages).map(|page| {
            page.inspect_err(|e| tracing::error!(error = %e, "streamed list failed"))
                .map(axum::body::Bytes::from)
        });
        return Ok(streamed_list(t, rv, items));
    }
    let (rv, pages) = core
        .store
        .stream_raw(&ctx.cluster, group, resource, ns)
        .await
        .map_err(store_error)?;
    let mut first = true;
    let items = tokio_stream::wrappers::ReceiverStream::new(pages).map(move |page| {
        let page = page.inspect_err(|e| tracing::error!(error = %e, "streamed list failed"))?;
        let mut out = String::with_capacity(page.iter().map(|o| o.body.len() + 1).sum());
        for o in &page {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
            out.push_str(&with_defaults(defaults.as_deref(), &o.body));
        }
        Ok::<_, crate::store::StoreError>(axum::body::Bytes::from(out))
    });
    Ok(streamed_list(t, rv, items))
}

/// A list response of `items`, the list's elements a chunk at a time, at version `rv`.
fn streamed_list(
    t: &Target,
    rv: u64,
    items: impl futures::Stream<Item = Result<axum::body::Bytes, crate::store::StoreError>>
    + Send
    + 'static,
) -> Response {
    use futures::StreamExt;
    let head = list::verbatim_head(&t.def, &t.version, &list::metadata(rv, None));
    let body = futures::stream::once(async move { Ok(axum::body::Bytes::from(head)) })
        .chain(items)
        .chain(futures::stream::once(async {
            Ok(axum::body::Bytes::from_static(
                list::VERBATIM_TAIL.as_bytes(),
            ))
        }));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// A continue token older than the event log: start the list again (410 Gone, as Kubernetes).
pub(super) fn replay_error(e: ReplayError) -> ApiError {
    match e {
        ReplayError::Expired { .. } => ApiError::expired(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter.",
        ),
        ReplayError::Store(e) => store_error(e),
    }
}
