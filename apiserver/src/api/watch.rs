//! Watches: replay from the event log (or an initial listing), then live events from the
//! fan-out, with bookmarks, timeouts, and 410 Gone (an `ERROR` event with reason `Expired`) for
//! versions older than the compacted log.

use std::{convert::Infallible, sync::Arc};

use axum::{body::Bytes, http::header, response::Response};
use serde_json::Value;
use tokio::sync::{broadcast::error::RecvError, mpsc};

use super::{
    AuthState, Core, Ctx,
    handlers::target::{Filter, Target, at_version, store_error},
    negotiate::{self, Representation},
    status::ApiError,
    table::IncludeObject,
};
use crate::store::{EventType, ReplayError, StoreError, StoredEvent};
use gpustack_kube_rest::watch::{Framer, stream_response, timeout};

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
    core: &Core,
    callers: &AuthState,
    headers: &axum::http::HeaderMap,
) -> Result<WatchSlot, ApiError> {
    let caller = super::caller::bearer(headers)
        .map(crate::store::token_hash)
        .unwrap_or_default();
    let max = core.options.max_watches_per_token;
    callers.watches.claim(&caller, max).ok_or_else(|| {
        ApiError::new(
            429,
            "TooManyRequests",
            format!("too many open watches for this token (at most {max}); close some and retry"),
        )
    })
}

/// How a watch's events are framed: protobuf for a client that takes nothing else, otherwise
/// the representation it asked for.
fn framer_for(ctx: &Ctx, t: &Target) -> Result<Framer, ApiError> {
    let accept = ctx.header(header::ACCEPT);
    if negotiate::protobuf_only(accept) {
        return Framer::protobuf(t.def.clone(), &t.version);
    }
    let representation =
        negotiate::for_resource(accept, true).ok_or_else(|| ApiError::not_acceptable(accept))?;
    let include = match representation {
        Representation::Json | Representation::Metadata => IncludeObject::Metadata,
        Representation::Table => {
            IncludeObject::parse(ctx.param("includeObject")).map_err(ApiError::bad_request)?
        }
    };
    Ok(Framer::new(
        t.def.clone(),
        &t.version,
        representation,
        include,
    ))
}

pub(crate) async fn serve(
    st: &Core,
    callers: &AuthState,
    ctx: &Ctx,
    t: &Target,
) -> Result<Response, ApiError> {
    let slot = claim_slot(st, callers, &ctx.headers)?;
    let filter = Filter::from_ctx(ctx, t)?;
    let framer = Arc::new(framer_for(ctx, t)?);
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
    let (def, strategy, version, events) =
        (t.def.clone(), t.kind, t.version.clone(), framer.clone());
    let line =
        move |kind: &str, obj: Value| events.event(kind, at_version(&def, strategy, &version, obj));

    // Subscribe before reading so nothing committed in between is missed; duplicates are
    // dropped by resourceVersion.
    let live = st.store.subscribe();
    let mut epoch = st.store.watch_epoch();
    let requested = ctx.param("resourceVersion").filter(|s| !s.is_empty());
    let (group, resource) = (t.def.storage_group.clone(), t.def.plural.clone());
    // The first read happens here, so that a store failure is this request's error (and a
    // version too old its 410); the rest streams from the watch's task, a page at a time.
    let start = if requested.is_none() || requested == Some("0") || send_initial {
        let (snapshot, objects) = st
            .store
            .stream_raw(&ctx.cluster, &group, &resource, t.namespace.as_deref())
            .await
            .map_err(store_error)?;
        Start::Listing {
            snapshot,
            objects,
            bookmark: send_initial,
        }
    } else {
        let rv = super::requested_version::parse(requested)?.unwrap_or(0);
        if !ctx.read_only {
            super::requested_version::reached(&st.store, rv).await?;
        }
        match st
            .store
            .events_page(&ctx.cluster, &group, &resource, rv, REPLAY_PAGE)
            .await
        {
            Ok(first) => Start::Replay { after: rv, first },
            Err(ReplayError::Expired {
                requested,
                compacted,
            }) => {
                let e = ApiError::expired(format!(
                    "too old resource version: {requested} ({compacted})"
                ));
                return Ok(stream_response(
                    framer.content_type(),
                    vec![framer.error(&e)],
                    None,
                ));
            }
            Err(ReplayError::Store(e)) => return Err(store_error(e)),
        }
    };

    let content_type = framer.content_type();
    // A few events ahead of the socket: a watcher that does not read holds little.
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(WATCH_AHEAD);
    let watcher = Watcher {
        store: st.store.clone(),
        cluster: ctx.cluster.clone(),
        group,
        resource,
        filter,
        line: Box::new(line),
        framer,
        tx,
    };
    let bookmark_every = st.options.bookmark_interval;
    epoch.borrow_and_update();
    tokio::spawn(async move {
        let _slot = slot;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        // The initial events race the deadline and the store's shutdown like the live ones.
        let last_rv = tokio::select! {
            _ = &mut deadline => return,
            _ = epoch.changed() => return,
            sent = watcher.initial(start) => match sent {
                Some(rv) => rv,
                None => return,
            },
        };
        watcher
            .follow(
                live,
                last_rv,
                deadline,
                epoch,
                bookmarks.then_some(bookmark_every),
            )
            .await;
    });
    Ok(stream_response(content_type, Vec::new(), Some(rx)))
}

/// How many framed events a watch keeps ready ahead of its socket.
const WATCH_AHEAD: usize = 16;

/// How many logged events a watch reads at a time when replaying from a version.
const REPLAY_PAGE: usize = 64;

/// Where a watch starts.
enum Start {
    /// With the collection as of `snapshot`, as ADDED events (then a bookmark marking their
    /// end, when `sendInitialEvents` asked for one).
    Listing {
        snapshot: u64,
        objects: mpsc::Receiver<Result<Vec<crate::store::RawObject>, StoreError>>,
        bookmark: bool,
    },
    /// With the logged events after version `after`, whose first page is `first`.
    Replay { after: u64, first: Vec<StoredEvent> },
}

/// Frames an event's object for the watcher (at the version it watches).
type Line = Box<dyn Fn(&str, Value) -> Bytes + Send + Sync>;

/// One watch's sending side.
struct Watcher {
    store: crate::store::Store,
    cluster: String,
    group: String,
    resource: String,
    filter: Filter,
    line: Line,
    framer: Arc<Framer>,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
}

impl Watcher {
    async fn send(&self, bytes: Bytes) -> Option<()> {
        self.tx.send(Ok(bytes)).await.ok()
    }

    /// Sends the initial events; the last version they cover, or `None` when the watch has
    /// ended (the client went away, or the log was compacted past a replay's next page).
    async fn initial(&self, start: Start) -> Option<u64> {
        match start {
            Start::Listing {
                snapshot,
                mut objects,
                bookmark,
            } => {
                while let Some(read) = objects.recv().await {
                    let page = match read {
                        Ok(page) => page,
                        Err(e) => {
                            return self
                                .send(self.framer.error(&store_error(e)))
                                .await
                                .and(None);
                        }
                    };
                    for o in page {
                        let obj = match serde_json::from_str(&o.body) {
                            Ok(obj) => obj,
                            Err(e) => {
                                let e = store_error(e.into());
                                return self.send(self.framer.error(&e)).await.and(None);
                            }
                        };
                        if self.filter.matches(&obj) {
                            self.send((self.line)("ADDED", obj)).await?;
                        }
                    }
                }
                if bookmark {
                    self.send(self.framer.bookmark(snapshot, true)).await?;
                }
                Some(snapshot)
            }
            Start::Replay { after, first } => {
                let mut last_rv = after;
                let mut page = first;
                loop {
                    let full = page.len() == REPLAY_PAGE;
                    for ev in page {
                        last_rv = last_rv.max(ev.rv);
                        // Replayed events carry no previous state: send what matches now.
                        if self.filter.matches(&ev.body) {
                            self.send((self.line)(ev.kind.as_str(), (*ev.body).clone()))
                                .await?;
                        }
                    }
                    if !full {
                        return Some(last_rv);
                    }
                    page = match self
                        .store
                        .events_page(
                            &self.cluster,
                            &self.group,
                            &self.resource,
                            last_rv,
                            REPLAY_PAGE,
                        )
                        .await
                    {
                        Ok(page) => page,
                        Err(e) => {
                            let e = match e {
                                ReplayError::Expired {
                                    requested,
                                    compacted,
                                } => ApiError::expired(format!(
                                    "too old resource version: {requested} ({compacted})"
                                )),
                                ReplayError::Store(e) => store_error(e),
                            };
                            return self.send(self.framer.error(&e)).await.and(None);
                        }
                    };
                }
            }
        }
    }

    /// Sends live events after `last_rv` until the deadline, the store's shutdown, the
    /// client's leaving or a lag (the client resumes from its last version, and the log fills
    /// the gap), with a bookmark every `bookmarks` if asked.
    async fn follow(
        &self,
        mut live: tokio::sync::broadcast::Receiver<StoredEvent>,
        mut last_rv: u64,
        mut deadline: std::pin::Pin<&mut tokio::time::Sleep>,
        mut epoch: tokio::sync::watch::Receiver<u64>,
        bookmarks: Option<std::time::Duration>,
    ) {
        let every = bookmarks.unwrap_or(std::time::Duration::from_secs(3600));
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = epoch.changed() => return,
                _ = self.tx.closed() => return,
                _ = ticker.tick(), if bookmarks.is_some() => {
                    if self.send(self.framer.bookmark(last_rv, false)).await.is_none() {
                        return;
                    }
                }
                got = live.recv() => match got {
                    Ok(ev) => {
                        if ev.rv <= last_rv {
                            continue;
                        }
                        last_rv = ev.rv;
                        if ev.key.group != self.group || ev.key.resource != self.resource {
                            continue;
                        }
                        let Some(ev) = self.store.seen_from(&self.cluster, &ev) else {
                            continue;
                        };
                        if let Some(kind) = classify(&self.filter, &ev)
                            && self.send((self.line)(kind, (*ev.body).clone())).await.is_none()
                        {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                },
            }
        }
    }
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
