//! `worker.gpustack.ai/v1` views of the `v1alpha1` custom resources (devices, instancetypes,
//! nodemodelstores, modelartifacts). The objects stay stored as the custom resources; a view
//! forwards each request to the cluster under the storage version, with `apiVersion` rewritten
//! on the way in and out, and renders the answer in the representation the client asked for
//! (JSON, `Table` with the view's columns, `PartialObjectMetadata`), watches included. Every
//! verb is served: garbage collection deletes through the preferred version.

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::StreamExt;
use gpustack_kube_rest::{
    bounded, list,
    negotiate::{self, Representation},
    resource::ResourceDef,
    response::json_response,
    status::ApiError,
    table::{self, IncludeObject},
    watch::{Framer, error_event},
};
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// Largest request body, as kube-apiserver's default.
pub const MAX_BODY: usize = 3 * 1024 * 1024;
/// Largest non-watch answer read from the cluster before rendering.
const MAX_ANSWER: usize = 256 * 1024 * 1024;
/// Longest watch event line accepted from the cluster.
const MAX_EVENT: usize = 16 * 1024 * 1024;

/// A served view: its description (at the served version) and the group and version it is
/// stored as.
#[derive(Clone, Debug)]
pub struct View {
    /// The view's description at the served version.
    pub def: ResourceDef,
    /// The served version.
    pub served: String,
    /// The stored version.
    pub storage: String,
    /// The stored group.
    pub storage_group: String,
}

impl View {
    fn served_api_version(&self) -> String {
        self.def.api_version(&self.served)
    }
    fn storage_api_version(&self) -> String {
        format!("{}/{}", self.storage_group, self.storage)
    }

    /// The cluster path of a request path under the served version.
    pub fn storage_path(&self, path: &str) -> Option<String> {
        let served = format!("/apis/{}/{}", self.def.group, self.served);
        let rest = path.strip_prefix(&served)?;
        Some(format!(
            "/apis/{}/{}{rest}",
            self.storage_group, self.storage
        ))
    }
}

/// Rewrites `apiVersion` from `from` to `to` in an object or a list's items.
pub fn convert(v: &mut Value, from: &str, to: &str) {
    if v.get("apiVersion").and_then(Value::as_str) == Some(from) {
        v["apiVersion"] = json!(to);
    }
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            convert(item, from, to);
        }
    }
}

/// What the client asked for, from the request alone.
pub struct Asked {
    /// The HTTP method.
    pub method: Method,
    /// The request path.
    pub path: String,
    /// The query string, if any.
    pub query: Option<String>,
    /// The request headers.
    pub headers: HeaderMap,
    /// Whether it is a watch.
    pub watch: bool,
}

fn query_param<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

impl Asked {
    /// The `Accept` header, empty when absent.
    pub fn accept(&self) -> &str {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// Whether the query asks for a watch (`watch=true|1`).
pub fn wants_watch(query: Option<&str>) -> bool {
    matches!(query_param(query, "watch"), Some("true" | "1"))
}

/// Serves one request on a view by forwarding it to the cluster.
pub async fn handle(
    client: &kube::Client,
    view: &View,
    asked: Asked,
    body: Bytes,
) -> Result<Response, ApiError> {
    let accept = asked.accept();
    let readable = asked.method == Method::GET;
    let representation = negotiate::for_resource(accept, readable)
        .ok_or_else(|| ApiError::not_acceptable(accept))?;
    let include = IncludeObject::parse(query_param(asked.query.as_deref(), "includeObject"))
        .map_err(ApiError::bad_request)?;
    let target = view
        .storage_path(&asked.path)
        .ok_or_else(ApiError::not_found_path)?;
    let uri = match &asked.query {
        Some(q) if !q.is_empty() => format!("{target}?{q}"),
        _ => target,
    };
    let content_type = asked.headers.get(header::CONTENT_TYPE).cloned();
    let body = if body.is_empty() {
        body
    } else {
        to_storage(view, &body, content_type.as_ref())?
    };
    let mut request = http::Request::builder()
        .method(asked.method.clone())
        .uri(uri)
        .header(header::ACCEPT, "application/json");
    if let Some(ct) = content_type {
        request = request.header(header::CONTENT_TYPE, ct);
    }
    let request = request
        .body(kube::client::Body::from(body.to_vec()))
        .map_err(|e| ApiError::internal(format!("building the cluster request: {e}")))?;
    let answer = client
        .send(request)
        .await
        .map_err(|e| unavailable(view, &e.to_string()))?;
    let status = answer.status();
    if asked.watch && status.is_success() {
        return Ok(stream_watch(
            view,
            representation,
            include,
            answer.into_body(),
        ));
    }
    if status.is_success() && representation == Representation::Json {
        // Plain JSON is passed through as it streams, with only the version rewritten: a
        // large list is never held whole (parsing it doubled the time and held it in memory).
        let from = format!("\"apiVersion\":\"{}\"", view.storage_api_version());
        let to = format!("\"apiVersion\":\"{}\"", view.served_api_version());
        let body = rewrite_stream(answer.into_body().into_data_stream(), from, to);
        return Ok((
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(body),
        )
            .into_response());
    }
    let bytes = read_bounded(answer.into_body(), MAX_ANSWER)
        .await
        .map_err(|e| unavailable(view, &e.to_string()))?;
    if !status.is_success() {
        // A `Status` from the cluster: passed on as it is (names and reasons already match).
        let mut response = Response::new(Body::from(bytes));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Ok(response);
    }
    let mut v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::internal(format!("the cluster answered with invalid JSON: {e}")))?;
    convert(
        &mut v,
        &view.storage_api_version(),
        &view.served_api_version(),
    );
    Ok(render(view, representation, include, v, status))
}

fn render(
    view: &View,
    representation: Representation,
    include: IncludeObject,
    v: Value,
    status: StatusCode,
) -> Response {
    let out = represent(&view.def, &view.served, representation, include, v);
    json_response(status, &out)
}

/// An object or a list (already at `version`) in the representation the client asked for.
pub fn represent(
    def: &ResourceDef,
    version: &str,
    representation: Representation,
    include: IncludeObject,
    v: Value,
) -> Value {
    let is_list = v.get("items").is_some_and(Value::is_array);
    match (representation, is_list) {
        (Representation::Json, _) => v,
        (_, true) => {
            let meta = v.get("metadata").cloned().unwrap_or_else(|| json!({}));
            let items = match v {
                Value::Object(mut m) => match m.remove("items") {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            list::render(def, version, representation, include, items, meta)
        }
        (Representation::Table, false) => {
            let rv = v
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(json!(""));
            table::table(
                def,
                &[v],
                include,
                json!({"resourceVersion": rv}),
                jiff::Timestamp::now(),
            )
        }
        (Representation::Metadata, false) => table::partial_object_metadata(&v),
    }
}

/// A request body at the storage version. JSON and YAML bodies (objects, merge and apply
/// patches) are parsed with their size and nesting bounded; a JSON patch (an array) names no
/// version and goes through unchanged.
fn to_storage(
    view: &View,
    body: &Bytes,
    content_type: Option<&HeaderValue>,
) -> Result<Bytes, ApiError> {
    let ct = content_type.and_then(|c| c.to_str().ok()).unwrap_or("");
    if ct.contains("protobuf") {
        return Err(ApiError::unsupported_media_type(ct));
    }
    let mut v = bounded::yaml_value(body, MAX_BODY)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))?;
    if !v.is_object() {
        return Ok(body.clone());
    }
    convert(
        &mut v,
        &view.served_api_version(),
        &view.storage_api_version(),
    );
    serde_json::to_vec(&v)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(e.to_string()))
}

fn unavailable(view: &View, why: &str) -> ApiError {
    ApiError::new(
        503,
        "ServiceUnavailable",
        format!(
            "{}.{} could not be read from the cluster: {why}",
            view.def.plural, view.def.group
        ),
    )
}

/// Replaces every `from` with `to` in a byte stream, also where `from` spans two chunks (the
/// last `from.len() - 1` bytes of a chunk wait for the next one).
fn rewrite_stream<S, E>(
    stream: S,
    from: String,
    to: String,
) -> impl futures::Stream<Item = Result<Bytes, E>> + Send
where
    S: futures::Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: Send + 'static,
{
    // Built once: a list of 10,000 objects passes through here, and a byte-by-byte scan
    // cost more than the hop itself.
    let rewrite = std::sync::Arc::new(Rewrite {
        from: memchr::memmem::Finder::new(from.as_bytes()).into_owned(),
        to: to.into_bytes(),
    });
    futures::stream::unfold(
        (stream, Vec::<u8>::new(), false),
        move |(mut stream, mut pending, done)| {
            let rewrite = rewrite.clone();
            async move {
                if done {
                    return None;
                }
                match stream.next().await {
                    Some(Ok(chunk)) => {
                        let (out, rest) = if pending.is_empty() {
                            rewrite.apply(&chunk, true)
                        } else {
                            pending.extend_from_slice(&chunk);
                            rewrite.apply(&pending, true)
                        };
                        Some((Ok(Bytes::from(out)), (stream, rest, false)))
                    }
                    Some(Err(e)) => Some((Err(e), (stream, pending, true))),
                    None => {
                        let (out, _) = rewrite.apply(&pending, false);
                        Some((Ok(Bytes::from(out)), (stream, Vec::new(), true)))
                    }
                }
            }
        },
    )
}

/// Replaces every occurrence of one byte string with another.
struct Rewrite {
    from: memchr::memmem::Finder<'static>,
    to: Vec<u8>,
}

impl Rewrite {
    /// `buf` with every occurrence replaced, split into what can be sent and, when more input
    /// follows (`more`), the shortest tail that may start an occurrence the next chunk completes.
    fn apply(&self, buf: &[u8], more: bool) -> (Vec<u8>, Vec<u8>) {
        let from = self.from.needle();
        let mut out = Vec::with_capacity(buf.len());
        let mut last = 0;
        for at in self.from.find_iter(buf) {
            out.extend_from_slice(&buf[last..at]);
            out.extend_from_slice(&self.to);
            last = at + from.len();
        }
        let tail = &buf[last..];
        let held = if more {
            (1..from.len().min(tail.len() + 1))
                .rev()
                .find(|&n| from.starts_with(&tail[tail.len() - n..]))
                .unwrap_or(0)
        } else {
            0
        };
        out.extend_from_slice(&tail[..tail.len() - held]);
        (out, tail[tail.len() - held..].to_vec())
    }
}

/// Reads a whole body, refusing one over `max` bytes.
pub async fn read_bounded<B>(body: B, max: usize) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limited = http_body_util::Limited::new(body, max);
    limited
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(ReadError)
}

/// A body that could not be read whole (too large, or the connection failed).
#[derive(Debug, thiserror::Error)]
#[error("reading the answer: {0}")]
pub struct ReadError(Box<dyn std::error::Error + Send + Sync>);

/// Streams a watch from the cluster, one event per line, each re-rendered at the served
/// version in the client's representation.
fn stream_watch(
    view: &View,
    representation: Representation,
    include: IncludeObject,
    body: kube::client::Body,
) -> Response {
    let framer = Framer::new(view.def.clone(), &view.served, representation, include);
    let (from, to) = (view.storage_api_version(), view.served_api_version());
    let lines = lines(body.into_data_stream());
    let events = lines.map(move |line| {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                return Ok::<_, std::convert::Infallible>(error_event(&ApiError::internal(
                    e.to_string(),
                )));
            }
        };
        let Ok(mut event) = serde_json::from_slice::<Value>(&line) else {
            return Ok(error_event(&ApiError::internal(
                "the cluster sent a watch event that is not JSON",
            )));
        };
        let kind = event["type"].as_str().unwrap_or("").to_owned();
        let object = event
            .get_mut("object")
            .map(Value::take)
            .unwrap_or(Value::Null);
        Ok(match kind.as_str() {
            "ADDED" | "MODIFIED" | "DELETED" => {
                let mut object = object;
                convert(&mut object, &from, &to);
                framer.event(&kind, object)
            }
            "BOOKMARK" => {
                let rv = object
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let initial_end = object
                    .pointer("/metadata/annotations/k8s.io~1initial-events-end")
                    .and_then(Value::as_str)
                    == Some("true");
                framer.bookmark(rv, initial_end)
            }
            _ => {
                let mut line = serde_json::to_vec(&json!({"type": kind, "object": object}))
                    .unwrap_or_default();
                line.push(b'\n');
                Bytes::from(line)
            }
        })
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(events),
    )
        .into_response()
}

/// Why a watch from the cluster stopped before its end.
#[derive(Debug, thiserror::Error)]
enum LineError<E> {
    #[error("a watch event longer than {} bytes", MAX_EVENT)]
    TooLong,
    #[error("the watch broke: {0}")]
    Broke(E),
}

/// Splits a byte stream into newline-terminated lines (without the newline), refusing a line
/// longer than [`MAX_EVENT`].
fn lines<S, E>(stream: S) -> impl futures::Stream<Item = Result<Bytes, LineError<E>>> + Send
where
    S: futures::Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send,
{
    futures::stream::unfold(
        (stream, Vec::<u8>::new(), false),
        |(mut stream, mut buf, done)| async move {
            if done {
                return None;
            }
            loop {
                if let Some(i) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=i).collect();
                    let line = Bytes::from(line).slice(..i);
                    if line.is_empty() {
                        continue;
                    }
                    return Some((Ok(line), (stream, buf, false)));
                }
                if buf.len() > MAX_EVENT {
                    return Some((Err(LineError::TooLong), (stream, Vec::new(), true)));
                }
                match stream.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(e)) => {
                        return Some((Err(LineError::Broke(e)), (stream, buf, true)));
                    }
                    None if buf.is_empty() => return None,
                    None => {
                        let rest = Bytes::from(std::mem::take(&mut buf));
                        return Some((Ok(rest), (stream, buf, true)));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> View {
        View {
            def: crate::api::resources::devices(),
            served: "v1".into(),
            storage: "v1alpha1".into(),
            storage_group: "worker.gpustack.ai".into(),
        }
    }

    #[test]
    fn paths_and_versions_are_rewritten() {
        let v = view();
        assert_eq!(
            v.storage_path("/apis/worker.gpustack.ai/v1/devices/n1/status")
                .as_deref(),
            Some("/apis/worker.gpustack.ai/v1alpha1/devices/n1/status")
        );
        assert_eq!(v.storage_path("/apis/other/v1/devices"), None);
        let mut list = json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "items": [
            {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices"},
            {"apiVersion": "something/else"}
        ]});
        convert(
            &mut list,
            "worker.gpustack.ai/v1alpha1",
            "worker.gpustack.ai/v1",
        );
        assert_eq!(list["apiVersion"], "worker.gpustack.ai/v1");
        assert_eq!(list["items"][0]["apiVersion"], "worker.gpustack.ai/v1");
        assert_eq!(list["items"][1]["apiVersion"], "something/else");
    }

    #[test]
    fn bodies_go_to_the_storage_version() {
        let v = view();
        let yaml = Bytes::from_static(
            b"apiVersion: worker.gpustack.ai/v1\nkind: Devices\nmetadata:\n  name: n\n",
        );
        let out: Value = serde_json::from_slice(&to_storage(&v, &yaml, None).unwrap()).unwrap();
        assert_eq!(out["apiVersion"], "worker.gpustack.ai/v1alpha1");
        let patch = Bytes::from_static(br#"[{"op":"add","path":"/metadata/labels","value":{}}]"#);
        assert_eq!(to_storage(&v, &patch, None).unwrap(), patch);
        let deep = Bytes::from("[".repeat(200) + &"]".repeat(200));
        assert!(to_storage(&v, &deep, None).is_err());
    }

    #[tokio::test]
    async fn versions_are_rewritten_across_chunk_boundaries() {
        let from = "\"apiVersion\":\"g/v1alpha1\"".to_owned();
        let to = "\"apiVersion\":\"g/v1\"".to_owned();
        let text =
            r#"{"apiVersion":"g/v1alpha1","items":[{"apiVersion":"g/v1alpha1","x":"apiVersion"}]}"#;
        for split in 0..text.len() {
            let chunks: Vec<Result<Bytes, String>> = vec![
                Ok(Bytes::copy_from_slice(&text.as_bytes()[..split])),
                Ok(Bytes::copy_from_slice(&text.as_bytes()[split..])),
            ];
            let out: Vec<u8> =
                rewrite_stream(futures::stream::iter(chunks), from.clone(), to.clone())
                    .map(|c| c.unwrap().to_vec())
                    .concat()
                    .await;
            assert_eq!(
                String::from_utf8(out).unwrap(),
                r#"{"apiVersion":"g/v1","items":[{"apiVersion":"g/v1","x":"apiVersion"}]}"#,
                "split at {split}"
            );
        }
    }

    #[tokio::test]
    async fn watch_lines_are_split_and_bounded() {
        let chunks: Vec<Result<Bytes, String>> = vec![
            Ok(Bytes::from_static(b"{\"a\":1}\n{\"b\"")),
            Ok(Bytes::from_static(b":2}\n\n{\"c\":3}")),
        ];
        let got: Vec<_> = lines(futures::stream::iter(chunks)).collect().await;
        let got: Vec<String> = got
            .into_iter()
            .map(|l| String::from_utf8(l.unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
        let huge: Vec<Result<Bytes, String>> = vec![Ok(Bytes::from(vec![b'x'; MAX_EVENT + 2]))];
        let got: Vec<_> = lines(futures::stream::iter(huge)).collect().await;
        assert_eq!(got.len(), 1);
        assert!(got[0].is_err());
    }
}
