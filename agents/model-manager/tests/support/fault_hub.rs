//! A Hugging Face-compatible hub over real HTTP/1.1 on loopback, written for the faults that
//! olah (the real local hub) cannot produce: it stands in for huggingface.co and its CDN when
//! they answer ranges, `429`/`5xx`, stall mid-body, cut a body short, flip a byte, redirect to
//! another host, or list a gated repository.
//!
//! It serves `/api/models/{repo}/revision/{rev}`, `/api/models/{repo}/tree/{sha}` (optionally
//! paginated with `Link: rel="next"`) and `/{repo}/resolve/{sha}/{path}`, and records every
//! request (path, range, whether `Authorization` came along) for the test to assert on.

#![allow(dead_code)]

use std::{
    collections::{HashMap, VecDeque},
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use sha1::{Digest as _, Sha1};
use sha2::Sha256;

pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

#[derive(Clone, Debug)]
pub struct HubFile {
    pub path: String,
    pub bytes: Vec<u8>,
    pub lfs: bool,
}

impl HubFile {
    pub fn new(path: &str, bytes: Vec<u8>, lfs: bool) -> Self {
        Self {
            path: path.into(),
            bytes,
            lfs,
        }
    }

    fn blob_id(&self) -> String {
        let mut h = Sha1::new();
        h.update(format!("blob {}\0", self.bytes.len()).as_bytes());
        h.update(&self.bytes);
        hex(&h.finalize())
    }

    fn oid(&self) -> String {
        hex(&Sha256::digest(&self.bytes))
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One misbehaviour, used up by the next download request for its file.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Behave for this request.
    Pass,
    Status(u16),
    /// Send this many body bytes, then go silent (the connection stays open).
    StallAfter(usize),
    /// Send this many body bytes, then close the connection.
    TruncateAfter(usize),
    /// Redirect to `url` (another host), keeping the path.
    RedirectTo(String),
}

#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
    /// Body bytes written for this request.
    pub sent: usize,
}

#[derive(Default)]
struct State {
    files: Vec<HubFile>,
    faults: HashMap<String, VecDeque<Fault>>,
    /// A byte offset to flip in a file's served content, every time.
    corrupt: HashMap<String, usize>,
    requests: Vec<Request>,
    ranges: bool,
    gated: bool,
    page_size: Option<usize>,
    /// Requests for a file whose range starts at or beyond this offset stall (until cleared).
    stall_from: HashMap<String, usize>,
    /// Redirect every download to this base URL.
    redirect_downloads: Option<String>,
}

#[derive(Clone)]
pub struct FaultHub {
    pub url: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl FaultHub {
    /// Serves `files` at [`COMMIT`] on `host` (e.g. `127.0.0.1` or `localhost`).
    pub fn start(host: &str, files: Vec<HubFile>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the fault hub");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            files,
            ranges: true,
            ..Default::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let hub = Self {
            url: format!("http://{host}:{port}"),
            state: Arc::clone(&state),
            stop: Arc::clone(&stop),
        };
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let state = Arc::clone(&state);
                let stop = Arc::clone(&stop);
                thread::spawn(move || serve(conn, &state, &stop));
            }
        });
        hub
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }

    pub fn fault(&self, path: &str, fault: Fault) {
        self.with(|s| s.faults.entry(path.into()).or_default().push_back(fault));
    }
    /// Every request for `path` starting at `offset` or later stalls before its first byte.
    pub fn stall_from(&self, path: &str, offset: usize) {
        self.with(|s| s.stall_from.insert(path.into(), offset));
    }
    pub fn clear_stalls(&self) {
        self.with(|s| s.stall_from.clear());
    }
    pub fn corrupt(&self, path: &str, offset: usize) {
        self.with(|s| s.corrupt.insert(path.into(), offset));
    }
    pub fn without_ranges(&self) {
        self.with(|s| s.ranges = false);
    }
    pub fn gated(&self) {
        self.with(|s| s.gated = true);
    }
    pub fn paginate(&self, page_size: usize) {
        self.with(|s| s.page_size = Some(page_size));
    }
    pub fn redirect_downloads(&self, base: &str) {
        self.with(|s| s.redirect_downloads = Some(base.into()));
    }
    pub fn requests(&self) -> Vec<Request> {
        self.with(|s| s.requests.clone())
    }
    /// Body bytes served for one file.
    pub fn bytes_sent(&self, file: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.path.ends_with(&format!("/{file}")) && r.path.contains("/resolve/"))
            .map(|r| r.sent)
            .sum()
    }
}

impl Drop for FaultHub {
    fn drop(&mut self) {
        if Arc::strong_count(&self.stop) <= 2 {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

fn respond(conn: &mut TcpStream, status: u16, headers: &[(&str, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
}

fn serve(mut conn: TcpStream, state: &Mutex<State>, stop: &AtomicBool) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let path = path.to_owned();
    let idx = {
        let mut s = state.lock().unwrap();
        s.requests.push(Request {
            path: path.clone(),
            range: headers.get("range").cloned(),
            authorization: headers.get("authorization").cloned(),
            sent: 0,
        });
        s.requests.len() - 1
    };
    if let Some(rest) = path.strip_prefix("/api/models/") {
        if let Some((_repo, _rev)) = rest.split_once("/revision/") {
            let body = format!(r#"{{"sha":"{COMMIT}"}}"#);
            return respond(&mut conn, 200, &[], body.as_bytes());
        }
        if rest.contains("/tree/") {
            return list(&mut conn, state, &path, query);
        }
        return respond(
            &mut conn,
            404,
            &[("x-error-code", "RepoNotFound".into())],
            b"",
        );
    }
    let Some((_, file)) = path.split_once(&format!("/resolve/{COMMIT}/")) else {
        return respond(
            &mut conn,
            404,
            &[("x-error-code", "EntryNotFound".into())],
            b"",
        );
    };
    let file = file.to_owned();
    let (fault, content, ranges, redirect, stall_from) = {
        let mut s = state.lock().unwrap();
        let fault = s.faults.get_mut(&file).and_then(VecDeque::pop_front);
        let Some(f) = s.files.iter().find(|f| f.path == file) else {
            drop(s);
            return respond(
                &mut conn,
                404,
                &[("x-error-code", "EntryNotFound".into())],
                b"",
            );
        };
        let mut content = f.bytes.clone();
        if let Some(&at) = s.corrupt.get(&file) {
            content[at] ^= 0xff;
        }
        let stall_from = s.stall_from.get(&file).copied();
        (
            fault,
            content,
            s.ranges,
            s.redirect_downloads.clone(),
            stall_from,
        )
    };
    if let Some(base) = redirect {
        return respond(
            &mut conn,
            302,
            &[("location", format!("{base}{path}"))],
            b"",
        );
    }
    let mut cut = None;
    let mut stall = None;
    match fault {
        Some(Fault::Status(code)) => return respond(&mut conn, code, &[], b"busy"),
        Some(Fault::RedirectTo(base)) => {
            return respond(
                &mut conn,
                302,
                &[("location", format!("{base}{path}"))],
                b"",
            );
        }
        Some(Fault::StallAfter(n)) => stall = Some(n),
        Some(Fault::TruncateAfter(n)) => cut = Some(n),
        Some(Fault::Pass) | None => {}
    }
    let total = content.len();
    let range = headers
        .get("range")
        .filter(|_| ranges)
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| {
            let (a, b) = r.split_once('-')?;
            let a: usize = a.parse().ok()?;
            let b: usize = if b.is_empty() {
                total - 1
            } else {
                b.parse().ok()?
            };
            Some((a, b.min(total - 1)))
        });
    if let (Some(from), Some((a, _))) = (stall_from, range)
        && a >= from
    {
        stall = Some(0);
    }
    let (status, body, extra) = match range {
        Some((a, b)) => (
            206,
            &content[a..=b],
            vec![("content-range", format!("bytes {a}-{b}/{total}"))],
        ),
        None => (200, &content[..], vec![]),
    };
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in &extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if conn.write_all(head.as_bytes()).is_err() {
        return;
    }
    let limit = stall.or(cut).unwrap_or(body.len()).min(body.len());
    let mut sent = 0;
    for chunk in body[..limit].chunks(16 * 1024) {
        if conn.write_all(chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let _ = conn.flush();
    state.lock().unwrap().requests[idx].sent = sent;
    if stall.is_some() {
        // Silent until the client gives up or the hub is dropped.
        let until = Instant::now() + Duration::from_secs(60);
        let mut probe = [0u8; 1];
        let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            match conn.read(&mut probe) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break,
            }
        }
    }
}

fn list(conn: &mut TcpStream, state: &Mutex<State>, path: &str, query: &str) {
    let s = state.lock().unwrap();
    let mut items: Vec<String> = Vec::new();
    let mut dirs: Vec<String> = Vec::new();
    for f in &s.files {
        if let Some((d, _)) = f.path.rsplit_once('/')
            && !dirs.contains(&d.to_owned())
        {
            dirs.push(d.to_owned());
            items.push(format!(
                r#"{{"type":"directory","oid":"{}","size":0,"path":"{d}"}}"#,
                "d".repeat(40)
            ));
        }
        let lfs = if f.lfs {
            let oid = if s.gated { "*".repeat(64) } else { f.oid() };
            format!(
                r#","lfs":{{"oid":"{oid}","size":{},"pointerSize":134}}"#,
                f.bytes.len()
            )
        } else {
            String::new()
        };
        items.push(format!(
            r#"{{"type":"file","oid":"{}","size":{},"path":"{}"{lfs}}}"#,
            f.blob_id(),
            f.bytes.len(),
            f.path
        ));
    }
    let page: usize = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("page="))
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let (slice, next) = match s.page_size {
        Some(n) => {
            let from = (page * n).min(items.len());
            let to = (from + n).min(items.len());
            let next = (to < items.len())
                .then(|| format!("<{path}?recursive=true&page={}>; rel=\"next\"", page + 1));
            (&items[from..to], next)
        }
        None => (&items[..], None),
    };
    let body = format!("[{}]", slice.join(","));
    drop(s);
    let headers: Vec<(&str, String)> = next.into_iter().map(|l| ("link", l)).collect();
    respond(conn, 200, &headers, body.as_bytes());
}
