//! End to end: the hub with its bookkeeping and its mirrored objects on PostgreSQL
//! (`worker-gateway --store=postgres://`) against a throwaway server over its unix socket
//! ([`Postgres`]): subscriptions and watch progress kept there and used after a restart, the
//! fleet served from the database by a hub with a fresh data directory (object for object as
//! upstream, at the same versions, watches resuming across the restart), the password never
//! shown, and a database that cannot be used refused at start in one line.

use std::collections::BTreeMap;

use gpustack_tests::{
    embedded::{DEADLINE, GatewayProcess, free_port},
    hub::{HubProcess, add_device, restart_and_resume, upstream},
    operator,
    postgres::Postgres,
    run, stderr, stdout,
    wait::wait_until,
};

#[test]
fn a_hub_on_postgres_keeps_its_subscriptions_and_watch_progress_there() {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a", "gpu-b"]);
    let data = root.path().join("hub");
    let flags = [
        "--worker-conn-mode=loopback".to_owned(),
        format!("--subscription-kubeconfig-dir={}", root.path().display()),
        format!("--store={url}"),
        "-v=3".to_owned(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let port = free_port();
    let hub = HubProcess::start(&data, port, &flags);
    let subscribe = format!(
        "/apis/workers?cluster=east&kubeconfig={}",
        east.kubeconfig().display()
    );
    let (code, body) = hub.request("POST", &subscribe, None);
    assert_eq!(code, 202, "{body}");
    hub.wait_phase("east", "Ready");
    hub.wait_mirrored("east", &["gpu-a", "gpu-b"]);
    // The bookkeeping is PostgreSQL's: the subscription, and each kind's progress (flushed
    // every second).
    assert_eq!(pg.psql("hub", "SELECT name FROM subscriptions"), "east");
    add_device(&east, "gpu-c");
    hub.wait_mirrored("east", &["gpu-a", "gpu-b", "gpu-c"]);
    wait_until(
        "the Devices watch's progress in PostgreSQL",
        DEADLINE,
        || {
            let rv = pg.psql(
                "hub",
                "SELECT rv FROM mirror_progress WHERE cluster = 'east' AND resource = 'devices'",
            );
            (!rv.is_empty()).then_some(())
        },
    );

    // The restarted hub finds its subscription in PostgreSQL and resumes its watches from the
    // progress stored there.
    let hub = restart_and_resume(hub, &east, &flags);
    let log = hub.log();
    // None of it is in the SQLite file: the same data directory without --store has no east.
    hub.stop();
    let plain = HubProcess::start(&data, port, &flags[..2]);
    assert!(plain.worker("east").is_none(), "{}", plain.log());
    plain.stop();
    let hub = HubProcess::start(&data, port, &flags);
    hub.wait_phase("east", "Ready");
    // The password is nowhere in what the hub shows, at the highest verbosity.
    assert!(!log.contains(pg.password()), "the log shows the password");
    let (_, workers) = hub.request("GET", "/apis/workers", None);
    let (_, metrics) = hub.request("GET", "/metrics", None);
    for shown in [&workers, &metrics] {
        assert!(!shown.contains(pg.password()));
    }

    // Unsubscribing removes the bookkeeping from PostgreSQL.
    let (code, body) = hub.request("DELETE", "/apis/workers?cluster=east", None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(pg.psql("hub", "SELECT count(*) FROM subscriptions"), "0");
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT count(*) FROM mirror_progress WHERE cluster = 'east'"
        ),
        "0"
    );
}

/// Starts `worker-gateway` with `store` and expects it to exit 1 with an error line that
/// names `--store` and holds each of `expected`, and shows no `secret`.
fn assert_refused_at_start(store: &str, secret: &str, expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "worker-gateway",
        &format!("--data-dir={}", dir.path().display()),
        "--bind-unix-path=",
        "--bind-address=127.0.0.1",
        &format!("--secure-port={}", free_port()),
        &format!("--store={store}"),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    let line = errors[0];
    assert!(line.contains("--store"), "{line}");
    for fragment in expected {
        assert!(line.contains(fragment), "{line} lacks {fragment:?}");
    }
    assert!(!err.contains(secret), "the password is shown: {err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn a_database_that_cannot_be_used_is_refused_at_start_in_one_line() {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let password = pg.password().to_owned();
    let socket = pg.socket_dir().display().to_string();

    // No server where the URL points.
    let nowhere = tempfile::tempdir().unwrap();
    let no_server = url.replace(&socket, &nowhere.path().display().to_string());
    assert_refused_at_start(&no_server, &password, &["/hub?host=", "No such file"]);
    // A wrong password: the one given is not shown either.
    let wrong = url.replace(&password, "wrong-pw-0123");
    assert_refused_at_start(&wrong, "wrong-pw-0123", &["password authentication failed"]);
    // A database that does not exist.
    let missing = url.replace("/hub?", "/nohub?");
    assert_refused_at_start(&missing, &password, &["\"nohub\" does not exist"]);

    // A schema newer than this binary: refused, and left as it was.
    let root = tempfile::tempdir().unwrap();
    let store = format!("--store={url}");
    HubProcess::start(&root.path().join("hub"), free_port(), &[&store]).stop();
    pg.pretend_newer_schema("hub", 29991231000000);
    let tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'";
    let before = pg.psql("hub", tables);
    assert_refused_at_start(&url, &password, &["newer schema", "29991231000000"]);
    assert_eq!(pg.psql("hub", tables), before, "the schema was changed");
}

#[test]
fn bad_store_values_are_refused_without_being_echoed() {
    for (value, expected) in [
        (
            "mysql://hub:pw-echo-1@db.example/hub",
            "want sqlite or a postgres://",
        ),
        (
            "postgres://hub:pw-echo-2@db.example/hub?sslmode=on",
            "sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full",
        ),
        (
            "postgres://hub:pw-echo-3@db.example/hub?passwd=pw-echo-3",
            "unknown parameter \"passwd\"",
        ),
    ] {
        let out = run(&["worker-gateway", &format!("--store={value}")]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: ") && err.contains("'--store'"),
            "{err}"
        );
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains("pw-echo"), "{err}");
    }
    // From the environment as from the command line, and shown without the password.
    let out = operator()
        .args(["worker-gateway", "--print-cmdline"])
        .env(
            "GPUSTACK_WORKER_GATEWAY_STORE",
            "postgresql://hub:pw-echo-4@db.example:6432/fleet?sslmode=verify-full",
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.contains("--store=postgres://hub@db.example:6432/fleet?sslmode=verify-full"),
        "{line}"
    );
    assert!(!line.contains("pw-echo"), "{line}");
}

/// The fleet view's Devices as the hub serves them: fleet name → (uid, upstream
/// resourceVersion, the hub's resourceVersion); and the list's resourceVersion.
fn fleet_devices(hub: &HubProcess) -> (BTreeMap<String, (String, String, String)>, String) {
    let (code, body) = hub.request(
        "GET",
        "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices",
        None,
    );
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).expect("a list");
    let items = list["items"].as_array().expect("items");
    let devices = items
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            let text = |v: &serde_json::Value| v.as_str().expect("a string").to_owned();
            (
                text(&m["name"]),
                (
                    text(&m["uid"]),
                    text(&m["annotations"]["gpustack.ai/upstream-resource-version"]),
                    text(&m["resourceVersion"]),
                ),
            )
        })
        .collect();
    (devices, text_of(&list["metadata"]["resourceVersion"]))
}

fn text_of(v: &serde_json::Value) -> String {
    v.as_str().expect("a string").to_owned()
}

/// `upstream`'s Devices as it serves them: fleet name → (uid, resourceVersion).
fn upstream_devices(upstream: &GatewayProcess) -> BTreeMap<String, (String, String)> {
    let list = upstream.get_json(&["devices.worker.gpustack.ai"]);
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            (
                format!("{}.{}", upstream.cluster, text_of(&m["name"])),
                (text_of(&m["uid"]), text_of(&m["resourceVersion"])),
            )
        })
        .collect()
}

/// Whether the hub's fleet holds exactly `upstreams`' Devices, each at its upstream uid and
/// resourceVersion.
fn fleet_matches(hub: &HubProcess, upstreams: &[&GatewayProcess]) -> bool {
    let want: BTreeMap<String, (String, String)> =
        upstreams.iter().flat_map(|u| upstream_devices(u)).collect();
    let (got, _) = fleet_devices(hub);
    let got: BTreeMap<String, (String, String)> = got
        .into_iter()
        .map(|(name, (uid, upstream_rv, _))| (name, (uid, upstream_rv)))
        .collect();
    got == want
}

#[test]
fn a_hub_on_postgres_serves_the_same_fleet_after_a_restart_with_a_fresh_data_directory() {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a", "gpu-b"]);
    let west = upstream(root.path(), "west", &["gpu-x"]);
    let flags = [
        "--worker-conn-mode=loopback".to_owned(),
        format!("--subscription-kubeconfig-dir={}", root.path().display()),
        format!("--store={url}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let port = free_port();
    let hub = HubProcess::start(&root.path().join("hub-1"), port, &flags);
    for up in [&east, &west] {
        let subscribe = format!(
            "/apis/workers?cluster={}&kubeconfig={}",
            up.cluster,
            up.kubeconfig().display()
        );
        let (code, body) = hub.request("POST", &subscribe, None);
        assert_eq!(code, 202, "{body}");
    }
    wait_until("the fleet to match its upstreams", DEADLINE, || {
        fleet_matches(&hub, &[&east, &west]).then_some(())
    });
    let (before, listed_at) = fleet_devices(&hub);
    assert_eq!(before.len(), 3, "{before:?}");
    // The objects are PostgreSQL's, not the data directory's.
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT count(*) FROM mirror_objects WHERE resource = 'devices'"
        ),
        "3"
    );
    hub.stop();
    std::fs::remove_dir_all(root.path().join("hub-1")).unwrap();

    // Another data directory: the same fleet at once, at the same versions, before and after
    // the mirrors are back.
    let hub = HubProcess::start(&root.path().join("hub-2"), port, &flags);
    assert_eq!(fleet_devices(&hub).0, before);
    hub.wait_phase("east", "Ready");
    hub.wait_phase("west", "Ready");
    assert_eq!(
        fleet_devices(&hub).0,
        before,
        "an unchanged relist wrote nothing"
    );
    add_device(&west, "gpu-y");
    wait_until("the new Devices in the fleet", DEADLINE, || {
        fleet_matches(&hub, &[&east, &west]).then_some(())
    });
    // A watch from the first hub's list resumes on this one with just what changed since.
    let (code, body) = hub.request(
        "GET",
        &format!(
            "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices?watch=1&resourceVersion={listed_at}&timeoutSeconds=1"
        ),
        None,
    );
    assert_eq!(code, 200, "{body}");
    let events: Vec<(String, String)> = body
        .lines()
        .map(|l| {
            let ev: serde_json::Value = serde_json::from_str(l).expect("a watch event");
            (
                text_of(&ev["type"]),
                text_of(&ev["object"]["metadata"]["name"]),
            )
        })
        .collect();
    assert_eq!(events, [("ADDED".to_owned(), "west.gpu-y".to_owned())]);
    hub.stop();
}

#[test]
fn a_hub_on_postgres_refuses_embedded_clusters() {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "worker-gateway",
        &format!("--data-dir={}", dir.path().display()),
        "--bind-unix-path=",
        "--bind-address=127.0.0.1",
        &format!("--secure-port={}", free_port()),
        "--embedded-cluster=hub",
        &format!("--store={url}"),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("SQLite only"), "{err}");
    assert!(!err.contains(pg.password()), "{err}");
}
