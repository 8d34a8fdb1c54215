//! The host as preflight reaches it: its root filesystem mounted at `--host-root`, its
//! executables entered through `chroot` (which changes the root, not the network namespace), and
//! the one lock that keeps two runs from probing at once.

use std::{
    fs::{self, File},
    io::{self, Read, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

/// Host directories that must be there for the root to be a host's.
pub const REQUIRED_DIRS: [&str; 3] = ["etc", "proc", "usr"];

/// The lock file, under the host root.
pub const LOCK_PATH: &str = "/var/lib/gpustack/operator/preflight/lock";

/// The host root's missing required directories.
pub fn missing_dirs(root: &Path) -> Vec<&'static str> {
    REQUIRED_DIRS
        .into_iter()
        .filter(|d| !root.join(d).is_dir())
        .collect()
}

/// Held for the whole run; dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another preflight run holds {0}")]
    Busy(String),
    #[error("cannot lock {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Takes the exclusive lock under `root`, without waiting.
pub fn lock(root: &Path) -> Result<RunLock, LockError> {
    let path = root.join(LOCK_PATH.trim_start_matches('/'));
    let shown = path.display().to_string();
    let io = |source| LockError::Io {
        path: shown.clone(),
        source,
    };
    fs::create_dir_all(path.parent().expect("the lock has a directory")).map_err(io)?;
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(RunLock { _file: file }),
        Err(fs::TryLockError::WouldBlock) => Err(LockError::Busy(shown)),
        Err(fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

/// How a host command ended.
/// Why a step preflight takes on the host itself failed (not a finding about a card): the
/// message a report row gives as its reason.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The host shell could not be started.
    #[error("{0}")]
    Shell(#[source] io::Error),
    /// The host shell could not enter the host root to run a host CLI.
    #[error("could not enter the host root: {0}")]
    EnterRoot(#[source] io::Error),
    /// The command ran and refused; its own explanation ([`Ran::why`]).
    #[error("{0}")]
    Refused(String),
    /// A host CLI that is not installed.
    #[error("{0} is not on the host")]
    NotOnHost(String),
    /// A host CLI that ran and failed.
    #[error("{command} failed: {why}")]
    CliFailed {
        /// The command line.
        command: String,
        /// Its own explanation ([`Ran::why`]).
        why: String,
    },
    /// Copying the in-image libraries to where the allocator mounts them from.
    #[error("staging {from} to {to} failed: {source}")]
    Stage {
        from: String,
        to: String,
        #[source]
        source: io::Error,
    },
    /// Creating or writing a file the device plugin would have put on the host.
    #[error("{action} {path}: {source}")]
    Write {
        /// `creating` or `writing`.
        action: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

#[derive(Clone, Debug)]
pub struct Ran {
    /// `None`: killed (by the timeout or a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Standard error's last non-empty line (a pointer to `--help` skipped), else standard
    /// output's: why it failed.
    pub fn why(&self) -> String {
        // The CLIs end a refusal with a pointer to their help ("Run 'docker run --help' for
        // more information"); the cause is the line before it.
        let last = |s: &str| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.contains("--help"))
                .map(str::to_owned)
        };
        last(&self.stderr)
            .or_else(|| last(&self.stdout))
            .unwrap_or_else(|| match self.code {
                Some(c) => format!("exit status {c}"),
                None => "killed".into(),
            })
    }
}

/// Runs host executables as `chroot <root> …`.
#[derive(Clone, Debug)]
pub struct HostShell {
    pub chroot: PathBuf,
    pub root: PathBuf,
    /// How long one command may take.
    pub timeout: Duration,
}

impl HostShell {
    /// The full argv for `inner`.
    pub fn argv(&self, inner: &[String]) -> Vec<String> {
        let mut argv = vec![
            self.chroot.display().to_string(),
            self.root.display().to_string(),
        ];
        argv.extend(inner.iter().cloned());
        argv
    }

    fn command(&self, inner: &[String]) -> Command {
        let mut cmd = Command::new(&self.chroot);
        cmd.arg(&self.root).args(inner);
        cmd
    }

    /// Runs `inner` to completion (or the timeout) with no stdin.
    pub fn run(&self, inner: &[String]) -> io::Result<Ran> {
        let mut child = self
            .command(inner)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let out = drain(child.stdout.take());
        let err = drain(child.stderr.take());
        let code = wait_until(&mut child, Instant::now() + self.timeout)?;
        Ok(Ran {
            code,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        })
    }

    /// `sh -c 'command -v <name>'` on the host: whether the host has `name` on its PATH. (Its
    /// answer is captured, not sent to `/dev/null`, which a bare host tree may lack.)
    pub fn has_command(&self, name: &str) -> bool {
        self.run(&["sh".into(), "-c".into(), format!("command -v {name}")])
            .is_ok_and(|r| r.ok())
    }

    /// Starts the commands together with stdin held open, waits until each has printed a line
    /// equal to `ready` (or ended), then closes their stdins and collects them. Returns each
    /// one's outcome and whether all were ready at the same moment.
    pub fn run_together(
        &self,
        commands: &[Vec<String>],
        ready: &str,
    ) -> io::Result<(Vec<Ran>, bool)> {
        let deadline = Instant::now() + self.timeout;
        let mut children = Vec::new();
        let (tx, rx) = mpsc::channel::<usize>();
        let mut outs = Vec::new();
        let mut errs = Vec::new();
        for (i, inner) in commands.iter().enumerate() {
            let mut child = self
                .command(inner)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            let stdout = child.stdout.take();
            let tx = tx.clone();
            let ready = ready.to_owned();
            outs.push(thread::spawn(move || {
                let mut text = String::new();
                let Some(mut s) = stdout else { return text };
                let mut buf = [0u8; 4096];
                let mut announced = false;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            text.push_str(&String::from_utf8_lossy(&buf[..n]));
                            if !announced && text.lines().any(|l| l.trim() == ready) {
                                announced = true;
                                let _ = tx.send(i);
                            }
                        }
                    }
                }
                if !announced {
                    // Ended without being ready: still release the others.
                    let _ = tx.send(usize::MAX);
                }
                text
            }));
            errs.push(drain(child.stderr.take()));
            children.push(child);
        }
        drop(tx);
        let mut ready_count = 0;
        let mut all_ready = true;
        for _ in 0..commands.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(usize::MAX) | Err(_) => {
                    all_ready = false;
                    break;
                }
                Ok(_) => ready_count += 1,
            }
        }
        all_ready &= ready_count == commands.len();
        // The barrier: every probe is alive and has shown its state; let them all go.
        for child in &mut children {
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.flush();
            }
        }
        let mut results = Vec::new();
        for ((mut child, out), err) in children.into_iter().zip(outs).zip(errs) {
            let code = wait_until(&mut child, deadline + Duration::from_secs(10))?;
            results.push(Ran {
                code,
                stdout: out.join().unwrap_or_default(),
                stderr: err.join().unwrap_or_default(),
            });
        }
        Ok((results, all_ready))
    }
}

fn drain(stream: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut s) = stream {
            let _ = s.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    })
}

/// Waits for `child` until `deadline`, killing it then. `None` when it was killed.
fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<Option<i32>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status.code());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            child.wait()?;
            return Ok(None);
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_is_the_cause_not_the_pointer_to_help() {
        let ran = Ran {
            code: Some(125),
            stdout: String::new(),
            stderr: "docker: Error response from daemon: Unknown runtime specified ascend.\n\nRun 'docker run --help' for more information\n".into(),
        };
        assert_eq!(
            ran.why(),
            "docker: Error response from daemon: Unknown runtime specified ascend."
        );
    }

    #[test]
    fn a_second_lock_is_busy_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let err = lock(dir.path()).unwrap_err();
        assert!(matches!(err, LockError::Busy(_)), "{err}");
        assert!(
            err.to_string()
                .ends_with("/var/lib/gpustack/operator/preflight/lock")
        );
        drop(first);
        lock(dir.path()).unwrap();
    }

    #[test]
    fn a_host_root_needs_etc_proc_and_usr() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(missing_dirs(dir.path()), ["etc", "proc", "usr"]);
        fs::create_dir(dir.path().join("etc")).unwrap();
        fs::create_dir(dir.path().join("usr")).unwrap();
        assert_eq!(missing_dirs(dir.path()), ["proc"]);
    }
}
