//! Watches: replay from the event log (or an initial listing), then live events from the
//! fan-out, with bookmarks, timeouts, and 410 Gone (an `ERROR` event with reason `Expired`) for
//! versions older than the compacted log.

use std::{convert::Infallible, sync::Arc};

use axum::{body::Bytes, http::header, response::Response};
use serde_json::Value;
use tokio::sync::{broadcast::error::RecvError, mpsc};

use super::{
    ApiState, Ctx,
    handlers::{Filter, Target, at_version, store_error},
    negotiate::{self, Representation},
    status::ApiError,
    table::IncludeObject,
};
use crate::store::{EventType, ReplayError, StoredEvent};
use gpustack_kube_rest::watch::{Framer, error_event, stream_response, timeout};

/// What a live event means for a watcher with `filter`: the type to send, if any. An object
/// that stops matching is sent as DELETED, one that starts matching as ADDED.
fn classify(filter: &Filter, ev: &StoredEvent) -> Option<&'static str> {
    let now = filter.matches(&ev.body);
    match ev.kind {
        EventType::Added => now.then_some("ADDED"),
        EventType::Deleted => now.then_some("DELETED"),
        EventType::Modified => {
            // Without selectors, an object in the watched namespace always matched before.
            let before = (filter.labels.0.is_empty() && filter.fields.0.is_empty())
                || ev
                    .prev
                    .as_deref()
                    .and_then(|text| serde_json::from_str::<Value>(text).ok())
                    .is_none_or(|p| filter.matches(&p));
            match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            }
        }
    }
}

/// Open watches per caller (a token's hash; "" for the unix socket's owner), so that one
/// token holder cannot hold every watch slot of the process.
#[derive(Clone, Default)]
pub struct OpenWatches {
    counts: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

/// One open watch, counted until dropped.
pub(crate) struct WatchSlot {
    owner: OpenWatches,
    caller: String,
}

impl OpenWatches {
    /// A slot for `caller`, unless it already holds `max`.
    pub(crate) fn claim(&self, caller: &str, max: usize) -> Option<WatchSlot> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(caller.to_owned()).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(WatchSlot {
            owner: self.clone(),
            caller: caller.to_owned(),
        })
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut counts = self.owner.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.caller);
            }
        }
    }
}

/// A watch slot for the caller of a request with `headers` (its token; the unix socket's
/// owner without one), or 429 when it holds [`super::ApiOptions::max_watches_per_token`].
pub(crate) fn claim_slot(
    st: &ApiState,
    headers: &axum::http::HeaderMap,
) -> Result<WatchSlot, ApiError> {
    let caller = super::bearer(headers)
        .map(crate::store::token_hash)
        .unwrap_or_default();
    let max = st.options.max_watches_per_token;
    st.watches.claim(&caller, max).ok_or_else(|| {
        ApiError::new(
            429,
            "TooManyRequests",
            format!("too many open watches for this token (at most {max}); close some and retry"),
        )
    })
}

pub(crate) async fn serve(st: &ApiState, ctx: &Ctx, t: &Target) -> Result<Response, ApiError> {
    let slot = claim_slot(st, &ctx.headers)?;
    let filter = Filter::from_ctx(ctx, t)?;
    let accept = ctx.header(header::ACCEPT);
    let representation =
        negotiate::for_resource(accept, true).ok_or_else(|| ApiError::not_acceptable(accept))?;
    let include = match representation {
        Representation::Json | Representation::Metadata => IncludeObject::Metadata,
        Representation::Table => {
            IncludeObject::parse(ctx.param("includeObject")).map_err(ApiError::bad_request)?
        }
    };
    let filter = match &t.name {
        // `.../pods/NAME?watch=1`: the deprecated single-object watch.
        Some(name) => {
            let mut f = filter;
            f.fields
                .0
                .push(("metadata.name".into(), true, name.clone()));
            f
        }
        None => filter,
    };
    let timeout = timeout(
        ctx.param("timeoutSeconds"),
        st.options.default_watch_timeout,
    )?
    .min(st.options.max_watch_timeout);
    let bookmarks = ctx.flag("allowWatchBookmarks");
    let send_initial = ctx.flag("sendInitialEvents");
    let framer = Arc::new(Framer::new(
        t.def.clone(),
        &t.version,
        representation,
        include,
    ));
    let (def, version, events) = (t.def.clone(), t.version.clone(), framer.clone());
    let line = move |kind: &str, obj: Value| events.event(kind, at_version(&def, &version, obj));

    // Subscribe before reading so nothing committed in between is missed; duplicates are
    // dropped by resourceVersion.
    let mut live = st.store.subscribe();
    let mut epoch = st.store.watch_epoch();
    let requested = ctx.param("resourceVersion").filter(|s| !s.is_empty());
    let mut initial = Vec::new();
    let mut last_rv;
    if requested.is_none() || requested == Some("0") || send_initial {
        let page = st
            .store
            .list(
                &ctx.cluster,
                &t.def.storage_group,
                &t.def.plural,
                t.namespace.as_deref(),
                None,
                0,
            )
            .await
            .map_err(store_error)?;
        last_rv = page.rv;
        for obj in page.items.into_iter().filter(|o| filter.matches(o)) {
            initial.push(line("ADDED", obj));
        }
        if send_initial {
            initial.push(framer.bookmark(last_rv, true));
        }
    } else {
        let rv_text = requested.unwrap_or("0");
        let rv: u64 = rv_text.parse().map_err(|_| {
            ApiError::bad_request(format!("resourceVersion: Invalid value: \"{rv_text}\""))
        })?;
        last_rv = rv;
        match st
            .store
            .events_since(&ctx.cluster, &t.def.storage_group, &t.def.plural, rv)
            .await
        {
            Ok(events) => {
                for ev in events {
                    last_rv = last_rv.max(ev.rv);
                    // Replayed events carry no previous state: send what matches now.
                    if filter.matches(&ev.body) {
                        initial.push(line(ev.kind.as_str(), (*ev.body).clone()));
                    }
                }
            }
            Err(ReplayError::Expired {
                requested,
                compacted,
            }) => {
                let e = ApiError::expired(format!(
                    "too old resource version: {requested} ({compacted})"
                ));
                initial.push(error_event(&e));
                return Ok(stream_response(initial, None));
            }
            Err(ReplayError::Store(e)) => return Err(store_error(e)),
        }
    }

    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let cluster = ctx.cluster.clone();
    let store = st.store.clone();
    let (group, resource) = (t.def.storage_group.clone(), t.def.plural.clone());
    let bookmark_every = st.options.bookmark_interval;
    epoch.borrow_and_update();
    tokio::spawn(async move {
        let _slot = slot;
        for line in initial {
            if tx.send(Ok(line)).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = epoch.changed() => return,
                _ = tx.closed() => return,
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(Ok(framer.bookmark(last_rv, false))).await.is_err() {
                        return;
                    }
                }
                got = live.recv() => match got {
                    Ok(ev) => {
                        if ev.rv <= last_rv {
                            continue;
                        }
                        last_rv = ev.rv;
                        if ev.key.group != group || ev.key.resource != resource {
                            continue;
                        }
                        let Some(ev) = store.seen_from(&cluster, &ev) else {
                            continue;
                        };
                        if let Some(kind) = classify(&filter, &ev)
                            && tx.send(Ok(line(kind, (*ev.body).clone()))).await.is_err()
                        {
                            return;
                        }
                    }
                    // Fell behind or the store closed: end; the client resumes from its last
                    // version and the log fills the gap.
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                },
            }
        }
    });
    Ok(stream_response(Vec::new(), Some(rx)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        api::selectors::{FieldSelector, LabelSelector},
        store::ObjectKey,
    };
    use serde_json::json;

    fn ev(kind: EventType, prev: Option<&str>, now: &str) -> StoredEvent {
        let obj = |l: &str| {
            Arc::new(json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": l}}}))
        };
        StoredEvent {
            rv: 2,
            key: ObjectKey {
                cluster: "c".into(),
                group: "".into(),
                resource: "pods".into(),
                namespace: "ns".into(),
                name: "a".into(),
            },
            kind,
            body: obj(now),
            prev: prev.map(|l| Arc::from(obj(l).to_string().as_str())),
        }
    }

    #[test]
    fn selector_transitions() {
        let f = Filter {
            namespace: Some("ns".into()),
            labels: LabelSelector::parse("app=web").unwrap(),
            fields: FieldSelector::default(),
            served_as: None,
        };
        assert_eq!(
            classify(&f, &ev(EventType::Added, None, "web")),
            Some("ADDED")
        );
        assert_eq!(classify(&f, &ev(EventType::Added, None, "db")), None);
        assert_eq!(
            classify(&f, &ev(EventType::Modified, Some("web"), "web")),
            Some("MODIFIED")
        );
        assert_eq!(
            classify(&f, &ev(EventType::Modified, Some("db"), "web")),
            Some("ADDED")
        );
        assert_eq!(
            classify(&f, &ev(EventType::Modified, Some("web"), "db")),
            Some("DELETED")
        );
        assert_eq!(
            classify(&f, &ev(EventType::Modified, Some("db"), "db")),
            None
        );
        assert_eq!(
            classify(&f, &ev(EventType::Deleted, None, "web")),
            Some("DELETED")
        );
        let other_ns = Filter {
            namespace: Some("x".into()),
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
            served_as: None,
        };
        assert_eq!(
            classify(&other_ns, &ev(EventType::Added, None, "web")),
            None
        );
    }
}
