//! The real Docker engine as the preflight tests use it: checking that it answers, building a
//! probe image from this machine's own files (nothing can be pulled), and making a fixture host
//! root drivable through `chroot`: the engine's CLI and a shell inside it, and the engine's
//! socket reachable at the path the CLI dials.

use std::{
    collections::BTreeSet,
    io,
    os::unix::net::{UnixListener, UnixStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
    thread,
};

use crate::sysfs::HostTree;

/// The engine's socket on this machine.
pub const ENGINE_SOCKET: &str = "/var/run/docker.sock";

/// Runs `docker` with `args`; its standard output, or a panic naming what failed.
pub fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running docker {args:?}: {e}"));
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds the project's image under `tag` from this build's binary with
/// `deploy/image/build.sh` (FROM scratch: nothing is pulled); the tag the script printed.
pub fn build_image(tag: &str) -> String {
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/image/build.sh");
    let out = Command::new(script)
        .args(["--binary", crate::binary().to_str().unwrap(), "--tag", tag])
        .output()
        .expect("running deploy/image/build.sh");
    assert!(
        out.status.success(),
        "building the image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Fails (never skips) when the engine does not answer: the tests need it.
pub fn require_engine() {
    let out = Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "the Docker engine does not answer: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("the docker CLI cannot be run: {e}"),
    }
}

/// The shared libraries `files` need, from `ldd`, plus the loader.
fn libraries_of(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut libs = BTreeSet::new();
    for f in files {
        let out = Command::new("ldd").arg(f).output().expect("running ldd");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux… (0x…)`
            let path = line
                .split("=>")
                .last()
                .and_then(|s| s.split_whitespace().next())
                .filter(|p| p.starts_with('/'));
            if let Some(p) = path {
                libs.insert(PathBuf::from(p));
            }
        }
    }
    libs
}

/// Copies `file` into `root` at the same absolute path.
fn copy_in(root: &Path, file: &Path) {
    let target = root.join(file.strip_prefix("/").unwrap());
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(file, &target)
        .unwrap_or_else(|e| panic!("copying {} into {}: {e}", file.display(), root.display()));
}

/// `sh` and `cat` of this machine (the probe's script needs nothing else), resolved through
/// their links (`/bin/sh` is often `dash`).
fn shell_and_cat() -> Vec<PathBuf> {
    ["/bin/sh", "/bin/cat"]
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap())
        .collect()
}

/// Copies `sh` and `cat` into `<root>/bin` under those names, with their libraries.
fn install_shell(root: &Path) {
    std::fs::create_dir_all(root.join("bin")).unwrap();
    for (name, real) in ["sh", "cat"].into_iter().zip(shell_and_cat()) {
        std::fs::copy(&real, root.join("bin").join(name)).unwrap();
    }
    for lib in libraries_of(&shell_and_cat()) {
        copy_in(root, &lib);
    }
}

/// A probe image built once per test process from this machine's `sh`, `cat`, their libraries
/// and those `extra_libraries_for` need (a shim must find its own dependencies in the image, as
/// it would in `ubuntu:24.04`), imported with `docker import`. Returns its tag.
pub fn probe_image(extra_libraries_for: &[PathBuf]) -> &'static str {
    static IMAGE: OnceLock<&'static str> = OnceLock::new();
    IMAGE.get_or_init(|| {
        const TAG: &str = "gpustack-preflight-probe:test";
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        install_shell(root);
        for lib in libraries_of(extra_libraries_for) {
            copy_in(root, &lib);
        }
        for d in ["etc", "proc", "dev", "sys", "tmp"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let mut tar = Command::new("tar")
            .args(["-C"])
            .arg(root)
            .args(["-c", "."])
            .stdout(Stdio::piped())
            .spawn()
            .expect("running tar");
        let status = Command::new("docker")
            .args(["import", "-", TAG])
            .stdin(tar.stdout.take().expect("tar's stdout is piped"))
            .stdout(Stdio::null())
            .status()
            .expect("running docker import");
        assert!(
            tar.wait().unwrap().success(),
            "tar of the probe root failed"
        );
        assert!(status.success(), "docker import of the probe image failed");
        TAG
    })
}

/// Makes `tree` a host root that `chroot` can enter and drive the engine from: this machine's
/// `sh`, `cat` and `docker` CLI inside it, `etc`, `proc`, `usr`, and a forwarder from
/// `<tree>/var/run/docker.sock` to the engine's socket (the CLI inside the chroot dials that path;
/// the bytes are the engine's own API, passed through untouched). The forwarder lives as long as
/// the test process.
pub fn drivable_host(tree: &HostTree) {
    let root = tree.root();
    install_shell(root);
    let docker_cli = which("docker").expect("the docker CLI is on PATH");
    let target = root.join("usr/bin/docker");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(&docker_cli, &target).unwrap();
    for lib in libraries_of(std::slice::from_ref(&docker_cli)) {
        copy_in(root, &lib);
    }
    for d in ["etc", "proc", "usr", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    forward_socket(&tree.path(ENGINE_SOCKET), Path::new(ENGINE_SOCKET));
}

/// `sh` (and its libraries) only: a host root the host CLI checks can be run in.
pub fn shell_only_host(tree: &HostTree) {
    let root = tree.root();
    install_shell(root);
    for d in ["etc", "proc", "usr", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_string_lossy()
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Accepts on `at` and relays each connection to `to`, both ways.
fn forward_socket(at: &Path, to: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let listener = UnixListener::bind(at).unwrap();
    let to = to.to_path_buf();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(engine) = UnixStream::connect(&to) else {
                continue;
            };
            relay(client, engine);
        }
    });
}

fn relay(a: UnixStream, b: UnixStream) {
    let (mut a_read, mut b_write) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    thread::spawn(move || {
        let _ = io::copy(&mut a_read, &mut b_write);
        let _ = b_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut b_read, mut a_write) = (b, a);
    thread::spawn(move || {
        let _ = io::copy(&mut b_read, &mut a_write);
        let _ = a_write.shutdown(std::net::Shutdown::Write);
    });
}

/// A character device node at `host` in the tree, with the numbers of `/dev/null`: a stand-in
/// for a GPU driver's node (`/dev/kfd`, `/dev/dri/card1`), which the engine only has to be able
/// to pass into a container.
pub fn device_node(tree: &HostTree, host: &str) {
    let path = tree.path(host);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let status = Command::new("mknod")
        .arg(&path)
        .args(["c", "1", "3"])
        .status()
        .expect("running mknod");
    assert!(status.success(), "mknod {}", path.display());
}

/// Containers carrying `label` (running or not), by id.
pub fn labelled_containers(label: &str) -> Vec<String> {
    docker(&["ps", "-a", "-q", "--filter", &format!("label={label}")])
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}
