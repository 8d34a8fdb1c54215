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
    let subscribe = subscribe_path(&east);
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
fn fleet_devices(hub: &HubProcess) -> FleetDevices {
    try_fleet_devices(hub).unwrap_or_else(|body| panic!("{body}"))
}

/// See [`fleet_devices`].
type FleetDevices = (BTreeMap<String, (String, String, String)>, String);

/// [`fleet_devices`], or the body of an answer that is not 200.
fn try_fleet_devices(hub: &HubProcess) -> Result<FleetDevices, String> {
    let (code, body) = hub.request(
        "GET",
        "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices",
        None,
    );
    if code != 200 {
        return Err(body);
    }
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
    Ok((devices, text_of(&list["metadata"]["resourceVersion"])))
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
/// resourceVersion (not while it cannot answer).
fn fleet_matches(hub: &HubProcess, upstreams: &[&GatewayProcess]) -> bool {
    let want: BTreeMap<String, (String, String)> =
        upstreams.iter().flat_map(|u| upstream_devices(u)).collect();
    let Ok((got, _)) = try_fleet_devices(hub) else {
        return false;
    };
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

// Several replicas on one database (issue 36, item 2): each upstream mirrored by one replica
// under a lease kept in PostgreSQL, every replica serving the whole fleet.

/// The lease time the replicas run with here: short, so take-overs are quick to wait for.
const LEASE_SECS: u64 = 3;

/// A replica's flags: the upstreams of `file`, the database `url`, a short lease.
fn replica_flags(url: &str, file: &std::path::Path) -> Vec<String> {
    vec![
        "--worker-conn-mode=loopback".to_owned(),
        format!("--upstreams={}", file.display()),
        format!("--store={url}"),
        format!("--mirror-lease-duration={LEASE_SECS}s"),
    ]
}

fn start_replica(root: &std::path::Path, name: &str, flags: &[String]) -> HubProcess {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    HubProcess::start(&root.join(name), free_port(), &flags)
}

/// The replica id `hub` logged at its start.
fn replica_id(hub: &HubProcess) -> String {
    wait_until("the replica's id in its log", DEADLINE, || {
        let log = hub.log();
        let line = log
            .lines()
            .find(|l| l.contains("under a lease kept in PostgreSQL"))?;
        let id = line.split("replica=").nth(1)?.split_whitespace().next()?;
        Some(id.trim_matches('"').to_owned())
    })
}

/// Who holds `upstream`'s lease, unexpired by the database's clock, and at which epoch.
fn lease_holder(pg: &Postgres, upstream: &str) -> Option<(String, i64)> {
    let row = pg.psql(
        "hub",
        &format!(
            "SELECT holder || ' ' || epoch FROM mirror_leases \
             WHERE upstream = '{upstream}' AND expires_at > clock_timestamp()"
        ),
    );
    let (holder, epoch) = row.split_once(' ')?;
    Some((holder.to_owned(), epoch.parse().ok()?))
}

/// The value of the series `name{cluster="CLUSTER"}` in `hub`'s /metrics, if present.
fn metric(hub: &HubProcess, name: &str, cluster: &str) -> Option<f64> {
    let (code, body) = hub.request("GET", "/metrics", None);
    assert_eq!(code, 200, "{body}");
    let series = format!("{name}{{cluster=\"{cluster}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
}

const HELD: &str = "gpustack_gateway_mirror_lease_held";
const REFUSED: &str = "gpustack_gateway_mirror_fenced_batches_total";

/// Two upstreams, `east` (gpu-a, gpu-b) and `west` (gpu-x), on a fresh database, with two
/// replicas started on them. Bind every field, as for [`TwoReplicas`].
struct EastAndWest {
    pg: Postgres,
    _root: tempfile::TempDir,
    east: GatewayProcess,
    west: GatewayProcess,
    a: HubProcess,
    b: HubProcess,
}

fn east_and_west_on_two_replicas() -> EastAndWest {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a", "gpu-b"]);
    let west = upstream(root.path(), "west", &["gpu-x"]);
    let file = gpustack_tests::hub::upstreams_file(root.path(), &[&east, &west]);
    let flags = replica_flags(&url, &file);
    let a = start_replica(root.path(), "hub-a", &flags);
    let b = start_replica(root.path(), "hub-b", &flags);
    EastAndWest {
        pg,
        _root: root,
        east,
        west,
        a,
        b,
    }
}

#[test]
fn two_replicas_mirror_each_upstream_once_and_both_serve_the_whole_fleet() {
    // Bound in this order so that they drop in the reverse: the processes, then the files, then
    // the database.
    let EastAndWest {
        pg,
        _root,
        east,
        west,
        a,
        b,
    } = east_and_west_on_two_replicas();
    let ids = [replica_id(&a), replica_id(&b)];
    assert_ne!(ids[0], ids[1]);
    for up in ["east", "west"] {
        // One holder per upstream, one of the two, and each replica's gauge agrees.
        let (holder, _) = wait_until(&format!("{up}'s lease to be held"), DEADLINE, || {
            lease_holder(&pg, up)
        });
        assert!(ids.contains(&holder), "{holder} is neither of {ids:?}");
        let held = wait_until(&format!("the replicas' gauges of {up}"), DEADLINE, || {
            let both = (metric(&a, HELD, up)?, metric(&b, HELD, up)?);
            (both.0 + both.1 == 1.0).then_some(both)
        });
        let expected = if holder == ids[0] {
            (1.0, 0.0)
        } else {
            (0.0, 1.0)
        };
        assert_eq!(held, expected, "{up} held by {holder}");
    }
    // Both serve every upstream's objects, whichever mirrors it.
    for hub in [&a, &b] {
        wait_until("the fleet on both replicas", DEADLINE, || {
            fleet_matches(hub, &[&east, &west]).then_some(())
        });
    }
    // A change reaches the replica that does not mirror it, through the database.
    add_device(&east, "gpu-c");
    for hub in [&a, &b] {
        hub.wait_mirrored("east", &["gpu-a", "gpu-b", "gpu-c"]);
    }
    // Only lease holders ever wrote: every event of an upstream carries an epoch.
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT count(*) FROM mirror_events WHERE cluster IN ('east', 'west') AND epoch IS NULL"
        ),
        "0"
    );
    // The file's upstreams are every replica's: not unsubscribed through one of them, and
    // nothing removed (west, named first, stays too).
    let (code, body) = a.request("DELETE", "/apis/workers?cluster=west&cluster=east", None);
    assert_eq!(code, 409, "{body}");
    assert!(
        body.contains("upstream of the --upstreams file")
            && body.contains("remove it from the file"),
        "{body}"
    );
    assert!(lease_holder(&pg, "east").is_some_and(|(holder, _)| ids.contains(&holder)));
    for hub in [&a, &b] {
        assert!(fleet_matches(hub, &[&east, &west]));
    }
}

/// A fleet watch of Devices streamed from `socket` from `rv`: each event as it arrives
/// (bookmarks left out), until the connection ends.
fn stream_fleet_watch(
    socket: std::path::PathBuf,
    rv: String,
) -> std::sync::mpsc::Receiver<serde_json::Value> {
    let timed = gpustack_tests::hub::stream_watch(
        socket,
        format!(
            "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices?watch=1&resourceVersion={rv}&timeoutSeconds=120"
        ),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (_, ev) in timed {
            if tx.send(ev).is_err() {
                return;
            }
        }
    });
    rx
}

/// (type, name, resourceVersion) of a watch event.
fn event_of(ev: &serde_json::Value) -> (String, String, u64) {
    (
        text_of(&ev["type"]),
        text_of(&ev["object"]["metadata"]["name"]),
        text_of(&ev["object"]["metadata"]["resourceVersion"])
            .parse()
            .expect("a version"),
    )
}

/// The versions of the logged Devices events of `upstream` after `after`, in order.
fn logged_versions(pg: &Postgres, upstream: &str, after: u64) -> Vec<u64> {
    pg.psql(
        "hub",
        &format!(
            "SELECT string_agg(rv::text, ',' ORDER BY rv) FROM mirror_events \
             WHERE cluster = '{upstream}' AND resource = 'devices' AND rv > {after}"
        ),
    )
    .split(',')
    .filter(|s| !s.is_empty())
    .map(|s| s.parse().expect("a version"))
    .collect()
}

/// One upstream, `east`, on a fresh database, mirrored by replica A, with replica B started and
/// waiting for its lease. Bind every field: one left out of a pattern is dropped at once (the
/// temporary directory with the sockets in it).
struct TwoReplicas {
    pg: Postgres,
    _root: tempfile::TempDir,
    east: GatewayProcess,
    a: HubProcess,
    b: HubProcess,
    b_id: String,
    a_epoch: i64,
}

fn east_held_by_a_with_b_waiting() -> TwoReplicas {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-0"]);
    let file = gpustack_tests::hub::upstreams_file(root.path(), &[&east]);
    let flags = replica_flags(&url, &file);
    // The first replica takes the lease; the second waits.
    let a = start_replica(root.path(), "hub-a", &flags);
    let a_id = replica_id(&a);
    let (_, a_epoch) = wait_until("A to hold east", DEADLINE, || {
        lease_holder(&pg, "east").filter(|(h, _)| *h == a_id)
    });
    a.wait_mirrored("east", &["gpu-0"]);
    let b = start_replica(root.path(), "hub-b", &flags);
    let b_id = replica_id(&b);
    TwoReplicas {
        pg,
        _root: root,
        east,
        a,
        b,
        b_id,
        a_epoch,
    }
}

#[test]
fn the_replica_mirroring_an_upstream_killed_mid_burst_is_replaced_with_nothing_lost() {
    // Bound in this order so that they drop in the reverse: the processes, then the files, then
    // the database.
    let TwoReplicas {
        pg,
        _root,
        east,
        a,
        b,
        b_id,
        a_epoch: _,
    } = east_held_by_a_with_b_waiting();
    // A fleet watcher on A, from A's list.
    let (_, listed_at) = fleet_devices(&a);
    let on_a = stream_fleet_watch(a.socket.clone(), listed_at.clone());

    // A burst of upstream writes; A is killed in its middle.
    let names: Vec<String> = (1..=120).map(|i| format!("gpu-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for chunk in names[..60].chunks(20) {
        gpustack_tests::hub::add_devices(&east, chunk);
    }
    let killed_at = std::time::Instant::now();
    a.crash();
    for chunk in names[60..].chunks(20) {
        gpustack_tests::hub::add_devices(&east, chunk);
    }
    east.kubectl_ok(&["delete", "devices", "gpu-0", "gpu-1"]);

    // The survivor takes east over within the lease time + 5 s.
    let (_, epoch) = wait_until(
        "B to take east over",
        std::time::Duration::from_secs(LEASE_SECS + 5),
        || lease_holder(&pg, "east").filter(|(h, _)| *h == b_id),
    );
    let takeover = killed_at.elapsed();
    assert!(epoch >= 2, "a take-over moves the epoch on: {epoch}");
    // Then every object acknowledged upstream is mirrored, object for object.
    wait_until("B's fleet to match the upstream", DEADLINE, || {
        fleet_matches(&b, &[&east]).then_some(())
    });
    eprintln!("take-over after kill -9: {takeover:?} (lease {LEASE_SECS} s)");

    // The watcher of A resumes on B from the last version it saw: every change once.
    // What A sent before it died: its connection has ended.
    let mut seen_on_a = Vec::new();
    let until = std::time::Instant::now() + DEADLINE;
    loop {
        match on_a.recv_timeout(until.saturating_duration_since(std::time::Instant::now())) {
            Ok(ev) => seen_on_a.push(event_of(&ev)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(e) => panic!("the watch on the killed replica did not end: {e}"),
        }
    }
    let last = seen_on_a
        .last()
        .map_or(listed_at.clone(), |(_, _, rv)| rv.to_string());
    let (code, body) = b.request(
        "GET",
        &format!(
            "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices?watch=1&resourceVersion={last}&timeoutSeconds=1"
        ),
        None,
    );
    assert_eq!(code, 200, "{body}");
    let seen_on_b: Vec<_> = body
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a watch event"))
        .filter(|ev| ev["type"] != "BOOKMARK")
        .map(|ev| event_of(&ev))
        .collect();
    let seen: Vec<u64> = seen_on_a
        .iter()
        .chain(&seen_on_b)
        .map(|(_, _, rv)| *rv)
        .collect();
    let listed_at: u64 = listed_at.parse().unwrap();
    assert_eq!(
        seen,
        logged_versions(&pg, "east", listed_at),
        "the watcher saw every logged change once, in order (A: {}, B: {})",
        seen_on_a.len(),
        seen_on_b.len()
    );
    eprintln!(
        "the watcher saw {} changes on the killed replica, {} more on the survivor",
        seen_on_a.len(),
        seen_on_b.len()
    );
    let deleted: Vec<&str> = seen_on_b
        .iter()
        .chain(&seen_on_a)
        .filter(|(t, _, _)| t == "DELETED")
        .map(|(_, n, _)| n.as_str())
        .collect();
    assert!(deleted.contains(&"east.gpu-0") && deleted.contains(&"east.gpu-1"));
}

#[test]
fn a_paused_lease_holder_writes_nothing_for_its_upstream_after_it_wakes() {
    // Bound in this order so that they drop in the reverse: the processes, then the files, then
    // the database.
    let TwoReplicas {
        pg,
        _root,
        east,
        a,
        b,
        b_id,
        a_epoch,
    } = east_held_by_a_with_b_waiting();

    // A paused past its lease: B takes over and mirrors what changes meanwhile.
    a.freeze();
    gpustack_tests::hub::add_devices(&east, &["gpu-1", "gpu-2"]);
    let (_, b_epoch) = wait_until(
        "B to take east over",
        std::time::Duration::from_secs(LEASE_SECS + 10),
        || lease_holder(&pg, "east").filter(|(h, _)| *h == b_id),
    );
    assert!(b_epoch > a_epoch);
    b.wait_mirrored("east", &["gpu-0", "gpu-1", "gpu-2"]);
    let first_of_b = pg.psql(
        "hub",
        &format!("SELECT min(rv) FROM mirror_events WHERE cluster = 'east' AND epoch = {b_epoch}"),
    );

    // A wakes up (its watch still delivers what it missed) and more changes come.
    a.thaw();
    gpustack_tests::hub::add_devices(&east, &["gpu-3"]);
    wait_until("A to stop mirroring east", DEADLINE, || {
        (a.log().contains("stopped mirroring the upstream")
            && metric(&a, HELD, "east") == Some(0.0))
        .then_some(())
    });
    for hub in [&a, &b] {
        hub.wait_mirrored("east", &["gpu-0", "gpu-1", "gpu-2", "gpu-3"]);
    }
    wait_until("both to match the upstream", DEADLINE, || {
        (fleet_matches(&a, &[&east]) && fleet_matches(&b, &[&east])).then_some(())
    });
    // Nothing written under A's epoch once B wrote under its own, and the lease stayed B's.
    assert_eq!(
        pg.psql(
            "hub",
            &format!(
                "SELECT count(*) FROM mirror_events WHERE cluster = 'east' \
                 AND rv > {first_of_b} AND epoch IS DISTINCT FROM {b_epoch}"
            ),
        ),
        "0",
        "a write under an older epoch after the take-over"
    );
    assert_eq!(lease_holder(&pg, "east"), Some((b_id, b_epoch)));
    // A's refusals are counted where a batch of its reached the database's check; a batch
    // refused before (the lease already known lost) never reached it.
    let refused = metric(&a, REFUSED, "east").unwrap_or(0.0);
    let log = a.log();
    assert_eq!(
        refused > 0.0,
        log.contains("a mirror write batch was refused"),
        "the counter and the log agree: {refused}"
    );
    eprintln!("refused batches on the paused replica: {refused}");
}

/// One answer of a replica to a fleet read: when it was asked (from the test's start), how
/// long it took, its code and body.
struct Answer {
    asked: std::time::Duration,
    took: std::time::Duration,
    code: u16,
    body: String,
}

/// Reads the fleet's Devices from each of `sockets` in turn (a full list, then a first page),
/// recording every answer, until `stop` is set.
fn read_fleet_until(
    sockets: Vec<std::path::PathBuf>,
    t0: std::time::Instant,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<Answer>> {
    std::thread::spawn(move || {
        let mut answers = Vec::new();
        let targets = [
            "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices",
            "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices?limit=1",
        ];
        let mut i = 0usize;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let socket = &sockets[i % sockets.len()];
            let target = targets[(i / sockets.len()) % targets.len()];
            i += 1;
            let asked = t0.elapsed();
            let (code, body) = gpustack_tests::hub::http_over_unix(socket, "GET", target, None)
                .unwrap_or_else(|e| (0, e.to_string()));
            answers.push(Answer {
                asked,
                took: t0.elapsed() - asked,
                code,
                body,
            });
            // About 20 reads a second: enough answers while the database is away.
            std::thread::park_timeout(std::time::Duration::from_millis(50));
        }
        answers
    })
}

/// A read waits for a connection at most the pool's acquire timeout (5 s); what the test
/// allows for it on a loaded machine.
const READ_BOUND: std::time::Duration = std::time::Duration::from_secs(8);

#[test]
fn the_database_restarted_under_two_replicas_answers_503_meanwhile_and_they_converge() {
    use std::sync::{Arc, atomic::AtomicBool};
    // Bound in this order so that they drop in the reverse: the processes, then the files, then
    // the database.
    let EastAndWest {
        pg,
        _root,
        east,
        west,
        a,
        b,
    } = east_and_west_on_two_replicas();
    for hub in [&a, &b] {
        wait_until("the fleet on both replicas", DEADLINE, || {
            fleet_matches(hub, &[&east, &west]).then_some(())
        });
    }
    // A fleet watcher on B lives through the outage, and a reader reads from both.
    let (_, listed_at) = fleet_devices(&b);
    let on_b = stream_fleet_watch(b.socket.clone(), listed_at.clone());
    // The watch is served before the database goes (its first read needs it; a busy machine
    // can send the request late): it has seen a change.
    gpustack_tests::hub::add_devices(&east, &["gpu-w"]);
    let first = on_b
        .recv_timeout(DEADLINE)
        .expect("the watch on B is served");
    let t0 = std::time::Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = read_fleet_until(vec![a.socket.clone(), b.socket.clone()], t0, stop.clone());

    pg.stop_fast();
    let down_at = t0.elapsed();
    // The upstreams change while the database is away.
    gpustack_tests::hub::add_devices(&east, &["gpu-c", "gpu-d"]);
    gpustack_tests::hub::add_devices(&west, &["gpu-y"]);
    east.kubectl_ok(&["delete", "devices", "gpu-a"]);
    // Both replicas say that they are not ready, and why.
    for hub in [&a, &b] {
        let (code, body) = hub.request("GET", "/readyz", None);
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("the database does not answer"), "{body}");
    }
    // The database stays away until several reads of each replica were answered meanwhile.
    wait_until(
        "reads answered while the database is away",
        DEADLINE,
        || {
            let (code, body) = b.request(
                "GET",
                "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices",
                None,
            );
            assert_eq!(code, 503, "{body}");
            (t0.elapsed() > down_at + std::time::Duration::from_secs(2)).then_some(())
        },
    );
    let up_from = t0.elapsed();
    pg.start_again();
    let back_at = std::time::Instant::now();

    // Both replicas reconnect by themselves and converge, object for object.
    for hub in [&a, &b] {
        wait_until("the fleet to match its upstreams again", DEADLINE, || {
            fleet_matches(hub, &[&east, &west]).then_some(())
        });
    }
    eprintln!(
        "both replicas matched the upstreams {:?} after the database was back",
        back_at.elapsed()
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.thread().unpark();
    let answers = reader.join().expect("the reader");
    // One holder per upstream, and the replicas' gauges agree.
    for up in ["east", "west"] {
        wait_until(&format!("one holder of {up}"), DEADLINE, || {
            lease_holder(&pg, up)?;
            let both = (metric(&a, HELD, up)?, metric(&b, HELD, up)?);
            (both.0 + both.1 == 1.0).then_some(())
        });
    }
    // Every answer was either the whole list or 503 with the reason; none took longer than a
    // read may wait; and none asked while the database was away was answered with data.
    let mut unavailable = 0;
    for ans in &answers {
        assert!(ans.took <= READ_BOUND, "a read took {:?}", ans.took);
        match ans.code {
            200 => {
                let list: serde_json::Value =
                    serde_json::from_str(&ans.body).expect("a whole list");
                assert!(list["items"].is_array(), "{}", ans.body);
                assert!(
                    ans.asked < down_at || ans.asked + ans.took > up_from,
                    "data answered while the database was away: {}",
                    ans.body
                );
            }
            503 => {
                assert!(
                    ans.body.contains("the store's database cannot be reached"),
                    "{}",
                    ans.body
                );
                unavailable += 1;
            }
            other => panic!("answered {other}: {}", ans.body),
        }
    }
    assert!(unavailable > 0, "no read was answered 503");
    eprintln!(
        "{} reads: {unavailable} answered 503; the slowest took {:?}",
        answers.len(),
        answers.iter().map(|a| a.took).max().unwrap_or_default()
    );

    // The watcher on B saw every logged change once, in order, across the outage.
    let listed_at: u64 = listed_at.parse().unwrap();
    let mut logged: Vec<u64> = ["east", "west"]
        .iter()
        .flat_map(|up| logged_versions(&pg, up, listed_at))
        .collect();
    logged.sort_unstable();
    let mut seen = vec![event_of(&first).2];
    while seen.len() < logged.len() {
        match on_b.recv_timeout(DEADLINE) {
            Ok(ev) => seen.push(event_of(&ev).2),
            Err(e) => panic!("the watch on B ended or stalled after {seen:?} of {logged:?}: {e}"),
        }
    }
    assert_eq!(
        seen, logged,
        "the watcher saw every logged change once, in order"
    );
}

/// Whether `hub` tracks upstream `name` (`GET /apis/workers`).
fn tracks(hub: &HubProcess, name: &str) -> bool {
    hub.worker(name).is_some()
}

/// A replica's flags for upstreams subscribed through its API (kubeconfigs under `root`).
fn subscribing_flags(root: &std::path::Path, url: &str) -> Vec<String> {
    vec![
        "--worker-conn-mode=loopback".to_owned(),
        format!("--subscription-kubeconfig-dir={}", root.display()),
        format!("--store={url}"),
        format!("--mirror-lease-duration={LEASE_SECS}s"),
    ]
}

/// The `POST` that subscribes `upstream` as `east`.
fn subscribe_path(upstream: &GatewayProcess) -> String {
    format!(
        "/apis/workers?cluster=east&kubeconfig={}",
        upstream.kubeconfig().display()
    )
}

#[test]
fn a_subscription_made_through_one_replica_reaches_the_others_without_a_restart() {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a"]);
    let flags = subscribing_flags(root.path(), &url);
    let a = start_replica(root.path(), "hub-a", &flags);
    let b = start_replica(root.path(), "hub-b", &flags);
    let b_id = replica_id(&b);
    let subscribe = subscribe_path(&east);
    let (code, body) = a.request("POST", &subscribe, None);
    assert_eq!(code, 202, "{body}");
    // B follows it: it tracks and serves east, and one of the two mirrors it.
    for hub in [&a, &b] {
        wait_until("both replicas to track east", DEADLINE, || {
            tracks(hub, "east").then_some(())
        });
        hub.wait_mirrored("east", &["gpu-a"]);
    }
    wait_until("one holder of east", DEADLINE, || {
        let both = (metric(&a, HELD, "east")?, metric(&b, HELD, "east")?);
        (both.0 + both.1 == 1.0).then_some(())
    });
    // With A gone, B mirrors the upstream it only learned of from A.
    a.stop();
    wait_until("B to take east", DEADLINE, || {
        lease_holder(&pg, "east").filter(|(h, _)| *h == b_id)
    });
    add_device(&east, "gpu-b");
    b.wait_mirrored("east", &["gpu-a", "gpu-b"]);

    // Unsubscribed through a replica that does not mirror it: the holder stops, nothing of
    // east is left, and nothing is written for it afterwards.
    let a = start_replica(root.path(), "hub-a", &flags);
    a.wait_mirrored("east", &["gpu-a", "gpu-b"]);
    let (code, body) = a.request("DELETE", "/apis/workers?cluster=east", None);
    assert_eq!(code, 200, "{body}");
    for hub in [&a, &b] {
        wait_until("both replicas to drop east", DEADLINE, || {
            (!tracks(hub, "east")).then_some(())
        });
    }
    add_device(&east, "gpu-c");
    let (code, _) = b.request(
        "GET",
        "/clusters/east/apis/worker.gpustack.ai/v1alpha1/devices",
        None,
    );
    assert_ne!(code, 200, "east is still served");
    let east_rows = "SELECT count(*) FROM mirror_objects WHERE cluster = 'east'";
    assert_eq!(pg.psql("hub", east_rows), "0");
    // Retired: held by nobody until subscribed again.
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT holder = '' AND expires_at = 'infinity' FROM mirror_leases WHERE upstream = 'east'"
        ),
        "t"
    );

    // Subscribed again through B: A follows, and the mirror is whole again.
    let (code, body) = b.request("POST", &subscribe, None);
    assert_eq!(code, 202, "{body}");
    for hub in [&a, &b] {
        wait_until("both replicas to track east again", DEADLINE, || {
            tracks(hub, "east").then_some(())
        });
        hub.wait_mirrored("east", &["gpu-a", "gpu-b", "gpu-c"]);
    }
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT count(*) FROM mirror_objects WHERE cluster = 'east' AND resource = 'devices'"
        ),
        "3"
    );
}

#[test]
fn an_unsubscribe_moments_after_another_replicas_subscribe_leaves_nothing_behind() {
    let pg = Postgres::start();
    let url = pg.create_database("hub");
    let root = tempfile::tempdir().unwrap();
    let east = upstream(root.path(), "east", &["gpu-a", "gpu-b"]);
    let flags = subscribing_flags(root.path(), &url);
    let a = start_replica(root.path(), "hub-a", &flags);
    let b = start_replica(root.path(), "hub-b", &flags);
    let subscribe = subscribe_path(&east);
    let (code, body) = b.request("POST", &subscribe, None);
    assert_eq!(code, 202, "{body}");
    // At once through A, which follows B's subscriptions only every second: most likely
    // before it runs a mirror of east, while B's mirror writes.
    let (code, body) = a.request("DELETE", "/apis/workers?cluster=east", None);
    assert_eq!(code, 200, "{body}");
    for hub in [&a, &b] {
        wait_until("both replicas to drop east", DEADLINE, || {
            (!tracks(hub, "east")).then_some(())
        });
    }
    // Nothing of east is left, and its lease is retired, so no replica writes it again.
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT count(*) FROM mirror_objects WHERE cluster = 'east'"
        ),
        "0"
    );
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT count(*) FROM subscriptions WHERE name = 'east'"
        ),
        "0"
    );
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT holder = '' AND expires_at = 'infinity' FROM mirror_leases WHERE upstream = 'east'"
        ),
        "t"
    );
}
