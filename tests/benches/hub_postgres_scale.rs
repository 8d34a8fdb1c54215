//! Issue 36's last row, not a pass/fail test: a synthetic hub of 10,000,000 objects on
//! PostgreSQL. Is a hub replica's first page of a fleet list (limit 500) within 50 ms, does its
//! memory stay flat from 1M to 10M objects, and what does an object cost on disk against its
//! JSON? Reproduce with
//!
//! ```text
//! cargo build --release --bin gpustack-operator
//! GPUSTACK_OPERATOR_BIN=$PWD/target/release/gpustack-operator \
//!   nice -n 19 cargo test -p gpustack-tests --bench hub_postgres_scale
//! ```
//!
//! (the harness itself does little: a debug build of it is enough; `cargo bench -p
//! gpustack-tests --bench hub_postgres_scale` measures the same release binary.) Knobs:
//! `GPUSTACK_BENCH_OBJECTS` (default 10,000,000; 20,000 is a smoke run of a minute),
//! `GPUSTACK_BENCH_UPSTREAMS` (default 100), `GPUSTACK_BENCH_REQUESTS` (default 50 per page).
//! At 10M the database takes about 28 GB under `$TMPDIR` (removed at the end) and the fill
//! about 25 minutes on a loaded 2-core machine.
//!
//! 1. A throwaway PostgreSQL ([`Postgres`]: unix socket, `fsync` and `full_page_writes` off as
//!    the fixture starts it, since nothing is written while measuring; autovacuum off, so that
//!    no vacuum of the freshly filled tables runs under the measurements, and `ANALYZE` run
//!    after each fill instead). A real `worker-gateway` creates the schema (its migrations) on
//!    a fresh database and stops.
//! 2. The hub's tables filled with SQL ([`synthetic_hub`]): upstreams `up-000`.. each holding
//!    nodes with a Devices (0.8 to 2.5 KB) and a Node (1.1 KB) each, as mirrored (objects,
//!    `ADDED` events, CRDs, fleet members, watch progress, sync times). First a tenth of the
//!    objects, then grown to all of them in the same database.
//! 3. At each size, a new replica (`worker-gateway --store=postgres://...`, a fresh data
//!    directory) with every upstream in its `--upstreams` file pointing at 192.0.2.1, out of
//!    reach: it serves the stored mirror. Measured over its unix socket: the time until it
//!    answers `/readyz`, its first fleet page (cold), then `GPUSTACK_BENCH_REQUESTS` times the
//!    first page of the fleet's Devices (`limit=500`) and as many times the second page (the
//!    first's `continue` token): median and p99, each a new connection, the body read whole.
//!    Its resident memory (`VmRSS`) after it answers and after the lists. Then the database's
//!    size on disk (`pg_database_size`; per table with its indexes and TOAST) per object,
//!    against the stored JSON's size (`octet_length` of each body, summed as it is stored).
//!    The pages' items are checked against the names the fill wrote.
//!
//! Measured (issue 36): docs/benchmarks.md, "The hub on PostgreSQL at 10,000,000 objects".

use std::{
    path::Path,
    time::{Duration, Instant},
};

use gpustack_tests::{
    bench::{Figure, env_usize, percentile, proc_status_mb},
    embedded::{GatewayProcess, free_port},
    hub::http_over_unix,
    postgres::Postgres,
    synthetic_hub::{self, node_name, upstream_name},
    wait::wait_until,
};
use serde_json::Value;

/// The fleet's Devices, first page.
const FIRST_PAGE: &str = "/clusters/_fleet/apis/worker.gpustack.ai/v1alpha1/devices?limit=500";

/// The page size asked for.
const LIMIT: usize = 500;

/// Nodes added by one fill statement: its rows are held once in the server's memory.
const CHUNK: usize = 10_000;

/// How long a replica may take to answer at all.
const START: Duration = Duration::from_secs(300);

/// The hub's database and how far it is filled.
struct Hub {
    pg: Postgres,
    url: String,
    upstreams: Vec<String>,
    /// Nodes per upstream stored so far.
    nodes: usize,
    /// The newest version handed out.
    rv: u64,
    objects: u64,
    json_bytes: u64,
}

impl Hub {
    fn psql(&self, sql: &str) -> String {
        self.pg.psql("hub", sql)
    }

    /// Runs a fill statement and counts what it stored.
    fn store(&mut self, sql: &str) {
        let answer = self.psql(&format!("SET work_mem = '256MB'; {sql}"));
        let (n, bytes) = synthetic_hub::parse_stored(&answer)
            .unwrap_or_else(|| panic!("a fill statement answered {answer:?}"));
        self.objects += n;
        self.json_bytes += bytes;
    }

    /// The upstreams' CRDs, members, progress and sync times.
    fn start_upstreams(&mut self) {
        let crd = gpustack_api::crds::all()
            .into_iter()
            .map(|c| serde_json::to_value(c).expect("a CRD as JSON"))
            .find(|c| c["spec"]["names"]["plural"] == "devices")
            .expect("the Devices CRD");
        let sql = synthetic_hub::upstreams_sql(&self.upstreams, &crd, self.rv);
        self.store(&sql);
        self.rv += self.upstreams.len() as u64 + 1;
    }

    /// Grows every upstream to `nodes` nodes; the time it took.
    fn grow_to(&mut self, nodes: usize) -> Duration {
        let start = Instant::now();
        let before = self.objects;
        for (k, cluster) in self.upstreams.clone().iter().enumerate() {
            let mut from = self.nodes;
            while from < nodes {
                let to = (from + CHUNK).min(nodes);
                self.store(&synthetic_hub::nodes_sql(cluster, from, to, self.rv));
                self.rv += 2 * (to - from) as u64;
                from = to;
            }
            if (k + 1) % 10 == 0 {
                let done = self.objects - before;
                println!(
                    "  {} upstreams grown: {done} objects in {:.0} s",
                    k + 1,
                    start.elapsed().as_secs_f64()
                );
            }
        }
        self.psql(&synthetic_hub::sequence_sql(self.rv));
        self.nodes = nodes;
        self.psql("ANALYZE");
        start.elapsed()
    }

    /// The database's size, and each big table's (with its TOAST and indexes) and its
    /// indexes', in bytes.
    fn disk(&self) -> (u64, Vec<(String, u64, u64)>) {
        let db: u64 = self
            .psql("SELECT pg_database_size(current_database())")
            .parse()
            .expect("a size");
        let rows = self.psql(
            "SELECT relname, pg_total_relation_size(oid), pg_indexes_size(oid) FROM pg_class \
             WHERE relname IN ('mirror_objects', 'mirror_events') ORDER BY relname DESC",
        );
        let tables = rows
            .lines()
            .filter_map(|l| {
                let mut f = l.split('|');
                Some((
                    f.next()?.to_owned(),
                    f.next()?.parse().ok()?,
                    f.next()?.parse().ok()?,
                ))
            })
            .collect();
        (db, tables)
    }

    /// The plan PostgreSQL runs for a page of one upstream's Devices (the query of
    /// `pg_mirror::reads::cluster_rows`, as a generic prepared plan, which sqlx's cached
    /// statements may get), with its run time.
    fn page_plan(&self) -> String {
        self.psql(
            "SET plan_cache_mode = force_generic_plan; \
             PREPARE page(text, text, text, text, text, text, bigint, bigint) AS \
               SELECT namespace, name, body FROM mirror_objects \
               WHERE cluster = $1 AND grp = $2 AND resource = $3 \
               AND ($4::text IS NULL OR namespace = $4) \
               AND (namespace, name) > ($5, $6) AND rv <= $7 \
               ORDER BY namespace, name LIMIT $8; \
             EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE page('up-000', \
               'worker.gpustack.ai', 'devices', NULL, '', 'node-0000100', \
               9223372036854775807, 501)",
        )
    }

    /// The plan of what a later page (read at the first page's version) also asks: the
    /// collection's changes since that version (`cluster_rows`' second query), here none.
    fn changes_plan(&self) -> String {
        self.psql(&format!(
            "SET plan_cache_mode = force_generic_plan; \
             PREPARE changes(text, text, text, bigint, text, text, text) AS \
               SELECT DISTINCT ON (e.namespace, e.name) e.namespace, e.name, e.type, p.body \
               FROM mirror_events e LEFT JOIN mirror_events p ON p.rv = e.prev_rv \
               WHERE e.cluster = $1 AND e.grp = $2 AND e.resource = $3 AND e.rv > $4 \
               AND ($5::text IS NULL OR e.namespace = $5) AND (e.namespace, e.name) > ($6, $7) \
               ORDER BY e.namespace, e.name, e.rv; \
             EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE changes('up-000', \
               'worker.gpustack.ai', 'devices', {}, NULL, '', 'node-0000100')",
            self.rv
        ))
    }
}

/// What one size measured.
struct Stage {
    objects: u64,
    json_bytes: u64,
    fill: Duration,
    ready_ms: f64,
    cold_ms: f64,
    first: Vec<f64>,
    second: Vec<f64>,
    rss_ready: f64,
    rss_after: f64,
    hwm: f64,
    db: u64,
    tables: Vec<(String, u64, u64)>,
}

/// Milliseconds since `start`.
fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// A GET over the replica's socket: its status, body and time in ms (connect to last byte).
fn get(socket: &Path, target: &str) -> (u16, String, f64) {
    let start = Instant::now();
    let (code, body) = http_over_unix(socket, "GET", target, None).expect("the replica answers");
    (code, body, ms(start))
}

/// The fleet names of the first `n` Devices after `skip`, in the fleet's order, as filled.
fn expected_names(upstreams: &[String], nodes: usize, skip: usize, n: usize) -> Vec<String> {
    upstreams
        .iter()
        .flat_map(|c| (0..nodes).map(move |i| format!("{c}.{}", node_name(i))))
        .skip(skip)
        .take(n)
        .collect()
}

/// A page's item names and its `continue` token.
fn page_of(code: u16, body: &str) -> (Vec<String>, Option<String>) {
    assert_eq!(code, 200, "{}", &body[..body.len().min(500)]);
    let list: Value = serde_json::from_str(body).expect("a list");
    let names = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let next = list["metadata"]["continue"].as_str().map(str::to_owned);
    (names, next)
}

/// The `n` times of `target`, sorted, each answer checked to hold `want`.
fn timed(socket: &Path, target: &str, n: usize, want: &[String]) -> Vec<f64> {
    let mut times: Vec<f64> = (0..n)
        .map(|i| {
            let (code, body, t) = get(socket, target);
            // Checking every answer would parse as much as was served; the first and the last.
            if i == 0 || i + 1 == n {
                assert_eq!(page_of(code, &body).0, want, "{target}");
            }
            t
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times
}

/// Starts a replica on the filled database, measures it, stops it.
fn measure(root: &Path, hub: &Hub, upstreams_flag: &str, requests: usize) -> Stage {
    let objects = hub.objects;
    let data = root.join(format!("replica-{objects}"));
    let socket = data.with_extension("sock");
    let store = format!("--store={}", hub.url);
    let args = [store.as_str(), upstreams_flag];
    let start = Instant::now();
    let gw = GatewayProcess::spawn(&data, "_admin", free_port(), &socket, &args);
    wait_until("the replica to answer /readyz", START, || {
        let (code, body) = http_over_unix(&socket, "GET", "/readyz", None).ok()?;
        (code == 200 && body == "ok").then_some(())
    });
    let ready_ms = ms(start);
    let pid = gw.pid().expect("the replica runs");
    let rss_ready = proc_status_mb(pid, "VmRSS");
    let (code, body, cold_ms) = get(&socket, FIRST_PAGE);
    let (names, next) = page_of(code, &body);
    let want_first = expected_names(&hub.upstreams, hub.nodes, 0, LIMIT);
    assert_eq!(names, want_first, "the first page is the filled Devices");
    let token = next.expect("a continue token: the fleet holds more than a page");
    let second = format!(
        "{FIRST_PAGE}&continue={}",
        percent_encoding::utf8_percent_encode(&token, percent_encoding::NON_ALPHANUMERIC)
    );
    let want_second = expected_names(&hub.upstreams, hub.nodes, LIMIT, LIMIT);
    let first = timed(&socket, FIRST_PAGE, requests, &want_first);
    let second = timed(&socket, &second, requests, &want_second);
    let rss_after = proc_status_mb(pid, "VmRSS");
    let hwm = proc_status_mb(pid, "VmHWM");
    assert!(gw.stop().success(), "the replica stopped cleanly");
    let (db, tables) = hub.disk();
    Stage {
        objects,
        json_bytes: hub.json_bytes,
        fill: Duration::ZERO,
        ready_ms,
        cold_ms,
        first,
        second,
        rss_ready,
        rss_after,
        hwm,
        db,
        tables,
    }
}

/// `n` with thousands separators.
fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The kubeconfig every upstream is reached with: a server in TEST-NET-1, never answering.
fn unreachable_upstreams(root: &Path, upstreams: &[String]) -> String {
    let kubeconfig = root.join("unreachable.kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://192.0.2.1:6443\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: not-used\ncontexts:\n- name: c\n  context: {cluster: gone, user: u}\ncurrent-context: c\n",
    )
    .expect("writing the kubeconfig");
    let file: String = upstreams
        .iter()
        .map(|u| format!("- name: {u}\n  kubeconfig: {}\n", kubeconfig.display()))
        .collect();
    let path = root.join("upstreams.yaml");
    std::fs::write(&path, file).expect("writing the upstreams file");
    format!("--upstreams={}", path.display())
}

fn main() {
    let total = env_usize("GPUSTACK_BENCH_OBJECTS", 10_000_000);
    let n_upstreams = env_usize("GPUSTACK_BENCH_UPSTREAMS", 100).max(1);
    let requests = env_usize("GPUSTACK_BENCH_REQUESTS", 50).max(2);
    gpustack_tests::announce_binary();
    // Two nodes' objects (a Devices and a Node) per node; the fleet's Devices must fill two
    // pages at the smaller size.
    let nodes_at = |objects: usize| objects / (2 * n_upstreams);
    let sizes = [nodes_at(total / 10), nodes_at(total)];
    assert!(
        sizes[0] * n_upstreams >= 2 * LIMIT,
        "GPUSTACK_BENCH_OBJECTS={total} is too small for two pages at a tenth of it"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();

    let pg = Postgres::start();
    pg.psql("postgres", "ALTER SYSTEM SET autovacuum = off");
    pg.psql("postgres", "SELECT pg_reload_conf()");
    let url = pg.create_database("hub");
    // 1. The schema, as a gateway makes it.
    let store = format!("--store={url}");
    let schema = GatewayProcess::spawn(
        &root.join("schema"),
        "_admin",
        free_port(),
        &root.join("schema.sock"),
        &[store.as_str()],
    );
    wait_until("the schema's gateway to answer", START, || {
        let (code, _) = http_over_unix(&root.join("schema.sock"), "GET", "/readyz", None).ok()?;
        (code == 200).then_some(())
    });
    assert!(schema.stop().success());

    // 2. and 3.
    let upstreams: Vec<String> = (0..n_upstreams).map(upstream_name).collect();
    let upstreams_flag = unreachable_upstreams(root, &upstreams);
    let mut hub = Hub {
        pg,
        url,
        upstreams,
        nodes: 0,
        rv: 0,
        objects: 0,
        json_bytes: 0,
    };
    hub.start_upstreams();
    let mut stages = Vec::new();
    for nodes in sizes {
        println!("filling to {nodes} nodes per upstream");
        let fill = hub.grow_to(nodes);
        println!(
            "filled: {} objects, {:.0} s for this step",
            count(hub.objects),
            fill.as_secs_f64()
        );
        println!("the page query's plan:\n{}", hub.page_plan());
        println!(
            "a later page's changes query's plan:\n{}",
            hub.changes_plan()
        );
        let mut stage = measure(root, &hub, &upstreams_flag, requests);
        stage.fill = fill;
        stages.push(stage);
    }
    report(&stages, requests);
}

/// One table of figures, the sizes side by side.
fn report(stages: &[Stage], requests: usize) {
    let each = |f: &dyn Fn(&Stage) -> String| -> String {
        stages
            .iter()
            .map(|s| format!("{}: {}", count(s.objects), f(s)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let pct = |v: &[f64]| {
        format!(
            "{:.1} ms (p99 {:.1})",
            percentile(v, 0.5),
            percentile(v, 0.99)
        )
    };
    let first_met = stages.iter().all(|s| percentile(&s.first, 0.5) <= 50.0);
    let second_met = stages.iter().all(|s| percentile(&s.second, 0.5) <= 50.0);
    let mut figures = vec![
        Figure::new(
            "objects stored (JSON per object); fill time of the step",
            each(&|s| {
                format!(
                    "{} B, {:.0} s",
                    s.json_bytes / s.objects.max(1),
                    s.fill.as_secs_f64()
                )
            }),
            None,
            Some(true),
        ),
        Figure::new(
            "replica start until /readyz; its first fleet page (cold)",
            each(&|s| format!("{:.0} ms; {:.1} ms", s.ready_ms, s.cold_ms)),
            None,
            Some(true),
        ),
        Figure::new(
            format!("first page of the fleet's Devices (limit 500), {requests} requests: median"),
            each(&|s| pct(&s.first)),
            Some("<= 50 ms"),
            Some(first_met),
        ),
        Figure::new(
            format!("second page (continue token), {requests} requests: median"),
            each(&|s| pct(&s.second)),
            Some("<= 50 ms"),
            Some(second_met),
        ),
        Figure::new(
            "replica VmRSS once ready / after the lists (VmHWM)",
            each(&|s| format!("{:.0} / {:.0} MB ({:.0})", s.rss_ready, s.rss_after, s.hwm)),
            None,
            Some(true),
        ),
    ];
    if let [small, big] = stages {
        let ratio = big.rss_after / small.rss_after;
        figures.push(Figure::new(
            format!(
                "replica VmRSS after the lists at {} / at {}",
                count(big.objects),
                count(small.objects)
            ),
            format!("{ratio:.2}"),
            Some("<= 1.2 (flat)"),
            Some(ratio <= 1.2),
        ));
    }
    figures.push(Figure::new(
        "database on disk per object / JSON per object",
        each(&|s| {
            let per = |b: u64| b / s.objects.max(1);
            format!(
                "{} B / {} B ({:.2}x)",
                per(s.db),
                per(s.json_bytes),
                s.db as f64 / s.json_bytes.max(1) as f64
            )
        }),
        None,
        Some(true),
    ));
    figures.push(Figure::new(
        "per object: table with TOAST and indexes (of it indexes)",
        each(&|s| {
            s.tables
                .iter()
                .map(|(t, all, idx)| {
                    format!(
                        "{t} {} B ({} B)",
                        all / s.objects.max(1),
                        idx / s.objects.max(1)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        }),
        None,
        Some(true),
    ));
    gpustack_tests::bench::print_summary("hub_postgres_scale", &figures);
}
