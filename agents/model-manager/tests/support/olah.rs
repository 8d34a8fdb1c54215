//! The real local hub: `olah` (a Hugging Face mirror server from PyPI) serving git repositories
//! built in a temporary directory, offline. The harness installs olah into a virtual
//! environment under the target directory the first time it is needed.

#![allow(dead_code)]

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use sha2::{Digest as _, Sha256};

pub const OLAH_VERSION: &str = "0.5.4";

/// The workspace root: the first directory above this crate holding `Cargo.lock`.
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|d| d.join("Cargo.lock").exists())
        .expect("a workspace root above the crate")
        .to_path_buf()
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `olah-cli` from a venv under the target directory, installed from PyPI when missing.
pub fn olah_cli() -> PathBuf {
    let venv = target_dir().join(format!("olah-{OLAH_VERSION}-venv"));
    let cli = venv.join("bin/olah-cli");
    if !cli.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        run(Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            &format!("olah=={OLAH_VERSION}"),
        ]));
    }
    cli
}

pub struct RepoFile<'a> {
    pub path: &'a str,
    pub bytes: &'a [u8],
    pub lfs: bool,
}

/// A git repository at `<mirrors>/models/<repo>` on branch `main`; LFS files are committed as
/// pointers with their content in `.git/lfs/objects` (how olah finds LFS content without
/// git-lfs). Returns the commit id.
pub fn make_repo(mirrors: &Path, repo: &str, files: &[RepoFile<'_>]) -> String {
    let dir = mirrors.join("models").join(repo);
    std::fs::create_dir_all(&dir).unwrap();
    let git = |args: &[&str]| {
        run(Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(&dir));
    };
    git(&["init", "-q", "-b", "main"]);
    for f in files {
        let path = dir.join(f.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if f.lfs {
            let oid: String = Sha256::digest(f.bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let pointer = format!(
                "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {}\n",
                f.bytes.len()
            );
            std::fs::write(&path, pointer).unwrap();
            let obj = dir
                .join(".git/lfs/objects")
                .join(&oid[..2])
                .join(&oid[2..4]);
            std::fs::create_dir_all(&obj).unwrap();
            std::fs::write(obj.join(&oid), f.bytes).unwrap();
        } else {
            std::fs::write(&path, f.bytes).unwrap();
        }
    }
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "model"]);
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&dir)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A running olah; killed on drop.
pub struct Olah {
    pub url: String,
    child: Child,
}

impl Drop for Olah {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts olah offline on a free port, serving the mirrors under `work/mirrors`.
pub fn start(work: &Path, probe_repo: &str) -> Olah {
    let cli = olah_cli();
    let port = free_port();
    let (repos, mirrors) = (work.join("repos"), work.join("mirrors"));
    std::fs::create_dir_all(&repos).unwrap();
    let config = work.join("olah.toml");
    std::fs::write(
        &config,
        format!(
            "[basic]\nhost = \"127.0.0.1\"\nport = {port}\nrepos-path = \"{}\"\nmirror-netloc = \"127.0.0.1:{port}\"\nmirror-lfs-netloc = \"127.0.0.1:{port}\"\nmirrors-path = [\"{}\"]\n[accessibility]\noffline = true\n",
            repos.display(),
            mirrors.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(work.join("olah.log")).unwrap();
    let child = Command::new(cli)
        .arg("-c")
        .arg(&config)
        .current_dir(work)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("starting olah-cli");
    let mut olah = Olah {
        url: format!("http://127.0.0.1:{port}"),
        child,
    };
    // The condition: olah answers the probe repository's revision with a 200. It fails fast
    // when olah exits, and gives up after 60 s.
    let request = format!(
        "GET /api/models/{probe_repo}/revision/main HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    );
    let serves = || {
        let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut answer = String::new();
        c.write_all(request.as_bytes()).ok()?;
        c.read_to_string(&mut answer).ok()?;
        answer.starts_with("HTTP/1.1 200").then_some(())
    };
    let log = work.join("olah.log");
    let deadline = Instant::now() + Duration::from_secs(60);
    while serves().is_none() {
        if let Ok(Some(status)) = olah.child.try_wait() {
            panic!(
                "olah exited ({status}) before serving; see {}",
                log.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "olah did not serve {probe_repo} within 60 s; see {}",
            log.display()
        );
        // Between two probes: a connection refused comes back at once, so pace them.
        std::thread::sleep(Duration::from_millis(25));
    }
    olah
}
