//! A throwaway PostgreSQL server for the tests of the hub's store: Debian's server binaries
//! (`/usr/lib/postgresql/<version>/bin`, the `postgresql` package `.ci/run` installs) run
//! `initdb` and `pg_ctl` in a temporary directory, as an unprivileged user when the tests run as
//! root (initdb refuses root), listening on a unix socket in that directory only
//! (`listen_addresses = ''`). The server is stopped and the directory removed on drop, also when
//! a test panics. Durability is off (`fsync`): nothing here outlives the test.

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The superuser the cluster is made with; the tests' connection strings name it.
pub const USER: &str = "gpustack";

/// A running server. Dropping it stops the server and removes its files.
pub struct Postgres {
    root: tempfile::TempDir,
    bin: PathBuf,
    /// Who runs the server's binaries: `None` for the current user (not root).
    run_as: Option<String>,
    password: String,
}

impl Postgres {
    /// Makes a cluster in a fresh temporary directory and starts it; panics with the server's
    /// log when it cannot.
    pub fn start() -> Self {
        let bin = server_binaries().unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server binaries are missing (/usr/lib/postgresql/*/bin/initdb): \
                 install Debian's `postgresql` package (.ci/run does)"
            )
        });
        let run_as = unprivileged_user();
        let root = tempfile::Builder::new()
            .prefix("pg")
            .tempdir()
            .expect("a temporary directory for PostgreSQL");
        let password = random_password();
        let pwfile = root.path().join("pwfile");
        std::fs::write(&pwfile, format!("{password}\n")).expect("writing the password file");
        if let Some(user) = &run_as {
            let (uid, gid) = ids_of(user);
            for path in [root.path(), pwfile.as_path()] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .expect("handing the directory to the server's user");
            }
        }
        let pg = Postgres {
            root,
            bin,
            run_as,
            password,
        };
        let data = pg.data_dir();
        pg.run_ok(
            "initdb",
            &[
                "--no-sync",
                "--auth-local=scram-sha-256",
                "--auth-host=scram-sha-256",
                &format!("--username={USER}"),
                &format!("--pwfile={}", pwfile.display()),
                "--encoding=UTF8",
                "--locale=C",
                &format!("--pgdata={}", data.display()),
            ],
        );
        // The password is in the cluster now; the file is not needed any longer.
        std::fs::remove_file(&pwfile).expect("removing the password file");
        let conf = format!(
            "\nlisten_addresses = ''\nunix_socket_directories = '{}'\nfsync = off\nfull_page_writes = off\n",
            pg.socket_dir().display()
        );
        append(&data.join("postgresql.conf"), &conf);
        let log = pg.root.path().join("server.log");
        let started = pg.run(
            "pg_ctl",
            &[
                "start",
                "--wait",
                "--timeout=60",
                &format!("--pgdata={}", data.display()),
                &format!("--log={}", log.display()),
            ],
        );
        if !started.status.success() {
            panic!(
                "pg_ctl start failed: {}\n{}",
                String::from_utf8_lossy(&started.stderr),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        pg
    }

    /// The directory the server's socket is in (`host=` of a connection string).
    pub fn socket_dir(&self) -> PathBuf {
        self.root.path().to_owned()
    }

    fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// The superuser's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// Creates the database `name` and returns a connection string for it over the socket.
    pub fn create_database(&self, name: &str) -> String {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
        self.url(name)
    }

    /// A `postgres://` connection string for database `name` over the socket, with the
    /// superuser's password.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://{USER}:{}@/{name}?host={}",
            self.password,
            self.socket_dir().display()
        )
    }

    /// Runs `sql` in database `db` with `psql`, returning its unaligned output; panics when it
    /// fails.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["--no-psqlrc", "--tuples-only", "--no-align", "--quiet"])
            .args(["--set=ON_ERROR_STOP=1", "--host"])
            .arg(self.socket_dir())
            .args(["--username", USER, "--dbname", db, "--command", sql])
            .env("PGPASSWORD", &self.password)
            .env_remove("PGSERVICE")
            .env("PGPASSFILE", "/dev/null")
            .output()
            .expect("running psql");
        assert!(
            out.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Records in database `db` that sqlx applied a migration `version` this checkout does not
    /// have: what a newer binary leaves behind.
    pub fn pretend_newer_schema(&self, db: &str, version: i64) {
        self.psql(
            db,
            &format!(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
                 VALUES ({version}, 'from a newer binary', true, '\\x00', 1)"
            ),
        );
    }

    /// Stops the server as an operator restarting it would (`pg_ctl stop -m fast`: open
    /// sessions are ended, the data is kept); [`Postgres::start_again`] brings it back.
    pub fn stop_fast(&self) {
        let data = format!("--pgdata={}", self.data_dir().display());
        self.run_ok("pg_ctl", &["stop", "--wait", "--mode=fast", &data]);
    }

    /// Starts the stopped server again on the same data and socket.
    pub fn start_again(&self) {
        let data = format!("--pgdata={}", self.data_dir().display());
        let log = format!("--log={}", self.root.path().join("server.log").display());
        self.run_ok("pg_ctl", &["start", "--wait", "--timeout=60", &data, &log]);
    }

    /// Runs one of the server's binaries as the server's user.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let program = self.bin.join(program);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.args(args)
            // The server's user may not read the test's working directory.
            .current_dir(self.root.path())
            .output()
            .expect("running a PostgreSQL binary")
    }

    fn run_ok(&self, program: &str, args: &[&str]) {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = format!("--pgdata={}", self.data_dir().display());
        // Immediate: the data is thrown away, so there is nothing to shut down cleanly.
        let _ = self.run("pg_ctl", &["stop", "--wait", "--mode=immediate", &data]);
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with `initdb` and `pg_ctl`.
fn server_binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// Who runs the server when the tests run as root: the `postgres` system user where the
/// package made one, else `nobody`. `None` when the tests run unprivileged already.
fn unprivileged_user() -> Option<String> {
    let me = id(&["-u"]).expect("`id -u` runs");
    if me != "0" {
        return None;
    }
    let user = if id(&["-u", "postgres"]).is_some() {
        "postgres"
    } else {
        "nobody"
    };
    Some(user.to_owned())
}

fn ids_of(user: &str) -> (u32, u32) {
    let number = |flag: &str| -> u32 {
        id(&[flag, user])
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the ids of {user}"))
    };
    (number("-u"), number("-g"))
}

/// `id`'s answer, if it has one.
fn id(args: &[&str]) -> Option<String> {
    let out = Command::new("id").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// 128 random bits as hex: std's hasher keys are drawn from the OS for each `RandomState`.
fn random_password() -> String {
    let half = || RandomState::new().build_hasher().finish();
    format!("pw{:016x}{:016x}", half(), half())
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("opening postgresql.conf");
    f.write_all(text.as_bytes())
        .expect("writing postgresql.conf");
}
