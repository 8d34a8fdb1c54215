//! A Hugging Face-compatible hub on loopback that serves large LFS files from disk: the
//! revision (with `siblings`, as `huggingface_hub.snapshot_download` reads it), the recursive
//! tree listing, and `HEAD`/`GET` of `/{repo}/resolve/{rev}/{path}` with byte ranges and the
//! headers clients read (`X-Repo-Commit`, `ETag`/`X-Linked-Etag`, `X-Linked-Size`).
//!
//! It stands in for huggingface.co and its CDN. olah, the real local hub the tests use, cannot
//! play that part at this size: version 0.5.4 reads each LFS object whole into memory, streams
//! it in 4 KiB Python chunks, ignores `Range`, and hashes the whole object on every `HEAD`, so
//! it would measure itself rather than the clients. Bodies go out with `sendfile` (std's copy
//! from a file to a socket), so the hub costs little CPU next to the client under test.

use std::{
    fs::File,
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    thread,
};

#[derive(Clone, Debug)]
pub struct HubFile {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    /// SHA-256 of the content (the LFS oid).
    pub oid: String,
}

impl HubFile {
    /// The LFS pointer committed in place of the content.
    fn pointer(&self) -> String {
        format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
            self.oid, self.size
        )
    }

    /// The git blob id of the pointer (the tree entry's `oid`).
    fn pointer_blob_id(&self) -> String {
        use sha1::{Digest as _, Sha1};
        let p = self.pointer();
        let mut h = Sha1::new();
        h.update(format!("blob {}\0", p.len()).as_bytes());
        h.update(p.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

struct Repo {
    name: String,
    commit: String,
    files: Vec<HubFile>,
}

/// Counts what the hub served, so a run can show how a client fetched.
#[derive(Default)]
pub struct HubCounters {
    pub requests: AtomicU64,
    pub ranged: AtomicU64,
    pub body_bytes: AtomicU64,
}

pub struct FileHub {
    pub url: String,
    pub counters: Arc<HubCounters>,
}

impl FileHub {
    /// Serves `files` as `repo` at `commit` on 127.0.0.1 (an ephemeral port) until the process
    /// ends.
    pub fn start(repo: &str, commit: &str, files: Vec<HubFile>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the hub");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let repo = Arc::new(Repo {
            name: repo.to_owned(),
            commit: commit.to_owned(),
            files,
        });
        let counters = Arc::new(HubCounters::default());
        let c = Arc::clone(&counters);
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (repo, c) = (Arc::clone(&repo), Arc::clone(&c));
                thread::spawn(move || serve(conn, &repo, &c));
            }
        });
        Self { url, counters }
    }

    /// (requests, ranged requests, body bytes) so far.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.counters.requests.load(Ordering::Relaxed),
            self.counters.ranged.load(Ordering::Relaxed),
            self.counters.body_bytes.load(Ordering::Relaxed),
        )
    }
}

fn head(conn: &mut TcpStream, status: &str, headers: &[(&str, String)]) -> bool {
    let mut text = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    conn.write_all(text.as_bytes()).is_ok()
}

fn small(conn: &mut TcpStream, status: &str, content_type: &str, body: &str, c: &HubCounters) {
    if head(
        conn,
        status,
        &[
            ("content-type", content_type.to_owned()),
            ("content-length", body.len().to_string()),
        ],
    ) {
        let _ = conn.write_all(body.as_bytes());
        c.body_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    }
}

fn serve(mut conn: TcpStream, repo: &Repo, c: &HubCounters) {
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::new(conn.try_clone().expect("cloning a socket"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let target = parts.next().unwrap_or("/").to_owned();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.trim().eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_owned());
        }
    }
    c.requests.fetch_add(1, Ordering::Relaxed);
    let path = target.split_once('?').map_or(target.as_str(), |(p, _)| p);
    let api = format!("/api/models/{}/", repo.name);
    if let Some(rest) = path.strip_prefix(&api) {
        if rest.starts_with("revision/") {
            let siblings: Vec<String> = repo
                .files
                .iter()
                .map(|f| format!(r#"{{"rfilename":"{}"}}"#, f.name))
                .collect();
            let body = format!(
                r#"{{"id":"{0}","modelId":"{0}","sha":"{1}","private":false,"disabled":false,"gated":false,"siblings":[{2}]}}"#,
                repo.name,
                repo.commit,
                siblings.join(",")
            );
            return small(&mut conn, "200 OK", "application/json", &body, c);
        }
        if rest.starts_with("tree/") {
            let items: Vec<String> = repo
                .files
                .iter()
                .map(|f| {
                    format!(
                        r#"{{"type":"file","oid":"{}","size":{},"path":"{}","lfs":{{"oid":"{}","size":{},"pointerSize":{}}}}}"#,
                        f.pointer_blob_id(),
                        f.size,
                        f.name,
                        f.oid,
                        f.size,
                        f.pointer().len()
                    )
                })
                .collect();
            let body = format!("[{}]", items.join(","));
            return small(&mut conn, "200 OK", "application/json", &body, c);
        }
    }
    let file = path
        .strip_prefix(&format!("/{}/resolve/", repo.name))
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(_rev, name)| repo.files.iter().find(|f| f.name == name));
    let Some(file) = file else {
        return small(&mut conn, "404 Not Found", "text/plain", "not found", c);
    };
    let total = file.size;
    let asked = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| {
            let (a, b) = r.split_once('-')?;
            let a: u64 = a.parse().ok()?;
            let b: u64 = if b.is_empty() {
                total - 1
            } else {
                b.parse().ok()?
            };
            (a <= b && a < total).then_some((a, b.min(total - 1)))
        });
    let (status, start, len) = match asked {
        Some((a, b)) => {
            c.ranged.fetch_add(1, Ordering::Relaxed);
            ("206 Partial Content", a, b - a + 1)
        }
        None => ("200 OK", 0, total),
    };
    let etag = format!("\"{}\"", file.oid);
    let mut headers = vec![
        ("content-type", "application/octet-stream".to_owned()),
        ("content-length", len.to_string()),
        ("accept-ranges", "bytes".to_owned()),
        ("x-repo-commit", repo.commit.clone()),
        ("etag", etag.clone()),
        ("x-linked-etag", etag),
        ("x-linked-size", total.to_string()),
    ];
    if asked.is_some() {
        headers.push((
            "content-range",
            format!("bytes {start}-{}/{total}", start + len - 1),
        ));
    }
    if !head(&mut conn, status, &headers) || method == "HEAD" {
        return;
    }
    let Ok(mut f) = File::open(&file.path) else {
        return;
    };
    if std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(start)).is_err() {
        return;
    }
    // `Take<File>` into a `TcpStream`: std sends it with sendfile.
    let sent = std::io::copy(&mut f.take(len), &mut conn).unwrap_or(0);
    c.body_bytes.fetch_add(sent, Ordering::Relaxed);
}
