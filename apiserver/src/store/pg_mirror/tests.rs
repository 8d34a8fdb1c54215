//! The PostgreSQL mirror against a throwaway server: what the SQLite store's mirror tests
//! check, and two replicas sharing one database.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use gpustack_tests::postgres::{Postgres, USER};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::{Fencing, Wakeup};
use crate::store::{
    EventType, ObjectKey, ReplayError, Store, StoreError, fleet::FLEET, mirror::SeenNames,
};

fn key(cluster: &str, name: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.into(),
        group: "worker.gpustack.ai".into(),
        resource: "devices".into(),
        namespace: String::new(),
        name: name.into(),
    }
}

fn device(name: &str, x: i64) -> Value {
    json!({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
           "metadata": {"name": name, "resourceVersion": "upstream-1"}, "spec": {"x": x}})
}

/// A replica: a store of its own (its SQLite file in `dir`) with its mirror on `pg`'s
/// database `hub`.
async fn replica(pg: &Postgres) -> (tempfile::TempDir, Store) {
    replica_waking(pg, Wakeup::Listen).await
}

/// [`replica`], its tailer woken as `wakeup` says.
async fn replica_waking(pg: &Postgres, wakeup: Wakeup) -> (tempfile::TempDir, Store) {
    replica_with(pg, wakeup, None).await
}

/// [`replica`], its upstreams' writes fenced by `fencing`.
async fn replica_with(
    pg: &Postgres,
    wakeup: Wakeup,
    fencing: Option<Arc<Fencing>>,
) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db")).await.unwrap();
    let options = PgConnectOptions::new()
        .socket(pg.socket_dir())
        .username(USER)
        .password(pg.password())
        .database("hub");
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .unwrap();
    crate::store::migrations::postgres()
        .run(&pool)
        .await
        .unwrap();
    store
        .mirror_on_postgres_waking(pool, wakeup, fencing)
        .await
        .unwrap();
    (dir, store)
}

async fn put(store: &Store, cluster: &str, name: &str, x: i64) -> Option<(EventType, u64)> {
    store
        .mirror_put(&key(cluster, name), device(name, x))
        .await
        .unwrap()
        .map(|ev| (ev.kind, ev.rv))
}

/// (name, spec.x, resourceVersion) of a page's objects.
fn seen(items: &[crate::store::RawObject]) -> Vec<(String, i64, String)> {
    items
        .iter()
        .map(|o| {
            let v: Value = serde_json::from_str(&o.body).unwrap();
            (
                o.name.clone(),
                v["spec"]["x"].as_i64().unwrap(),
                v["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn mirror_writes_lists_snapshots_and_the_fleet_view_on_postgres() {
    let pg = Postgres::start();
    pg.create_database("hub");
    let (_dir, store) = replica(&pg).await;
    for c in ["east", "west"] {
        store.join_fleet(c).await.unwrap();
    }
    assert_eq!(
        put(&store, "east", "a", 1).await,
        Some((EventType::Added, 1))
    );
    assert_eq!(
        put(&store, "east", "b", 1).await,
        Some((EventType::Added, 2))
    );
    // A relist of the same content writes nothing.
    assert_eq!(put(&store, "east", "a", 1).await, None);
    let (grp, res) = ("worker.gpustack.ai", "devices");
    let snapshot = store
        .list_raw("east", grp, res, None, None, 0)
        .await
        .unwrap();
    assert_eq!(snapshot.rv, 2);
    assert_eq!(
        put(&store, "east", "a", 2).await,
        Some((EventType::Modified, 3))
    );
    let gone = store
        .mirror_delete(&key("east", "b"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((gone.kind, gone.rv), (EventType::Deleted, 4));
    assert_eq!(gone.body["spec"]["x"], 1);
    assert_eq!(
        put(&store, "east", "c", 1).await,
        Some((EventType::Added, 5))
    );
    put(&store, "west", "z", 7).await.unwrap();

    let (rv, body) = store.get(&key("east", "a")).await.unwrap().unwrap();
    assert_eq!((rv, &body["spec"]["x"]), (3, &json!(2)));
    assert_eq!(body["metadata"]["resourceVersion"], "3");
    let now = store
        .list_raw("east", grp, res, None, None, 0)
        .await
        .unwrap();
    assert_eq!(
        seen(&now.items),
        [("a".into(), 2, "3".into()), ("c".into(), 1, "5".into())]
    );
    // The first page's snapshot, read back after the changes, a page at a time.
    let first = store
        .list_raw_at("east", grp, res, None, None, 1, snapshot.rv)
        .await
        .unwrap();
    assert!(first.more);
    let rest = store
        .list_raw_at("east", grp, res, None, Some(("", "a")), 0, snapshot.rv)
        .await
        .unwrap();
    let mut at: Vec<_> = seen(&first.items);
    at.extend(seen(&rest.items));
    assert_eq!(
        at,
        [("a".into(), 1, "1".into()), ("b".into(), 1, "2".into())]
    );

    // The log replays every change; the fleet view's under its names.
    let log: Vec<_> = store
        .events_since("east", grp, res, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.rv,
                e.kind,
                e.key.name.clone(),
                e.body["spec"]["x"].clone(),
            )
        })
        .collect();
    assert_eq!(
        log,
        [
            (1, EventType::Added, "a".into(), json!(1)),
            (2, EventType::Added, "b".into(), json!(1)),
            (3, EventType::Modified, "a".into(), json!(2)),
            (4, EventType::Deleted, "b".into(), json!(1)),
            (5, EventType::Added, "c".into(), json!(1)),
        ]
    );
    let fleet_log = store.events_since(FLEET, grp, res, 4).await.unwrap();
    let names: Vec<_> = fleet_log.iter().map(|e| e.key.name.as_str()).collect();
    assert_eq!(names, ["east.c", "west.z"]);
    assert_eq!(
        fleet_log[1].body["metadata"]["labels"]["gpustack.ai/cluster"],
        "west"
    );
    for limit in [0, 1, 2, 100] {
        let mut names = Vec::new();
        let mut after: Option<(String, String)> = None;
        loop {
            let at = after.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
            let page = store
                .list_raw(FLEET, grp, res, None, at, limit)
                .await
                .unwrap();
            names.extend(page.items.iter().map(|o| o.name.clone()));
            match (page.more, page.items.last()) {
                (true, Some(l)) => after = Some((l.namespace.clone(), l.name.clone())),
                _ => break,
            }
        }
        assert_eq!(names, ["east.a", "east.c", "west.z"], "limit {limit}");
    }
    let (_, fleet_a) = store.get(&key(FLEET, "east.a")).await.unwrap().unwrap();
    assert_eq!(
        fleet_a["metadata"]["annotations"]["gpustack.ai/original-name"],
        "a"
    );

    // A relist's sweep, a count, dropping a mirror, a barrier.
    let mut keep = SeenNames::default();
    keep.insert("", "a");
    assert_eq!(
        store.mirror_sweep("east", grp, res, &keep).await.unwrap(),
        1
    );
    assert_eq!(store.count("east", grp, res).await.unwrap(), 1);
    assert_eq!(store.drop_mirror("west").await.unwrap(), 1);
    store.barrier().await.unwrap();
    assert_eq!(pg.psql("hub", "SELECT count(*) FROM mirror_objects"), "1");
    assert_eq!(pg.psql("hub", "SELECT rv FROM mirror_sequence"), "8");
}

#[tokio::test]
async fn two_replicas_share_one_sequence_and_each_sees_every_write_once_in_order() {
    let pg = Postgres::start();
    pg.create_database("hub");
    let (_d1, one) = replica(&pg).await;
    one.join_fleet("east").await.unwrap();
    let (_d2, two) = replica(&pg).await;
    assert!(two.in_fleet("east"), "members are the database's");
    let mut at_one = one.subscribe();
    let mut at_two = two.subscribe();
    const EACH: usize = 300;
    let write = |store: Store, prefix: &'static str| async move {
        for i in 0..EACH {
            store
                .queue_mirror_put(&key("east", &format!("{prefix}-{i}")), device(prefix, 1))
                .await
                .unwrap();
        }
        store.barrier().await.unwrap();
    };
    tokio::join!(write(one.clone(), "one"), write(two.clone(), "two"));
    for events in [&mut at_one, &mut at_two] {
        let mut names = BTreeSet::new();
        let mut last = 0;
        while names.len() < 2 * EACH {
            let ev = tokio::time::timeout(Duration::from_secs(10), events.recv())
                .await
                .expect("every write fanned out")
                .unwrap();
            assert_eq!(
                ev.rv,
                last + 1,
                "versions in order, none skipped or repeated"
            );
            last = ev.rv;
            assert!(names.insert(ev.key.name.clone()));
        }
    }
    let (rv, _) = two.get(&key("east", "one-7")).await.unwrap().unwrap();
    assert!(rv > 0);
    let all = 2 * EACH as u64;
    let one_rv = || async { (one.current_rv().await == all).then_some(()) };
    gpustack_tests::wait::until("the tailer's version", Duration::from_secs(10), one_rv).await;
    let fleet = two
        .list_raw(FLEET, "worker.gpustack.ai", "devices", None, None, 0)
        .await
        .unwrap();
    assert_eq!(fleet.items.len(), 2 * EACH);
    assert_eq!(fleet.rv, 2 * EACH as u64);
}

/// Issue 36's choice between `LISTEN`/`NOTIFY` and a poll of the log, measured: writes on one
/// replica at about 200/s, and the time from each write's acknowledgement until it reaches
/// the fan-out of a replica that listens and of one that polls every 10 ms (run with
/// `--nocapture` for the figures). Both must see every write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_and_poll_both_fan_out_every_write_of_another_replica() {
    let pg = Postgres::start();
    pg.create_database("hub");
    let (_d1, writer) = replica(&pg).await;
    writer.join_fleet("east").await.unwrap();
    let (_d2, listening) = replica_waking(&pg, Wakeup::Listen).await;
    let (_d3, polling) = replica_waking(&pg, Wakeup::Poll(Duration::from_millis(10))).await;
    const WRITES: usize = 400;
    let arrivals = |store: &Store| {
        let mut events = store.subscribe();
        tokio::spawn(async move {
            let mut at = std::collections::HashMap::new();
            while at.len() < WRITES {
                let Ok(Ok(ev)) = tokio::time::timeout(Duration::from_secs(10), events.recv()).await
                else {
                    break;
                };
                at.insert(ev.key.name.clone(), std::time::Instant::now());
            }
            at
        })
    };
    let (heard, polled) = (arrivals(&listening), arrivals(&polling));
    let mut acked = Vec::with_capacity(WRITES);
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    for i in 0..WRITES {
        tick.tick().await;
        let name = format!("w-{i}");
        writer
            .mirror_put(&key("east", &name), device(&name, 1))
            .await
            .unwrap();
        acked.push((name, std::time::Instant::now()));
    }
    for (how, arrived) in [
        ("LISTEN", heard.await.unwrap()),
        ("poll 10 ms", polled.await.unwrap()),
    ] {
        assert_eq!(arrived.len(), WRITES, "{how}: every write arrives");
        let mut ms: Vec<f64> = acked
            .iter()
            .map(|(n, at)| arrived[n].saturating_duration_since(*at).as_secs_f64() * 1000.0)
            .collect();
        ms.sort_by(f64::total_cmp);
        println!(
            "{how}: write acknowledged on one replica to the other's fan-out, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            ms[WRITES / 2],
            ms[WRITES * 99 / 100],
            ms[WRITES - 1]
        );
    }
}

/// Sets upstream `east`'s lease row: held by `holder` at `epoch`, expiring in `secs` seconds
/// by the database's clock (negative: expired).
fn lease(pg: &Postgres, holder: &str, epoch: i64, secs: i64) {
    pg.psql(
        "hub",
        &format!(
            "INSERT INTO mirror_leases (upstream, holder, epoch, expires_at) \
             VALUES ('east', '{holder}', {epoch}, clock_timestamp() + interval '{secs} seconds') \
             ON CONFLICT (upstream) DO UPDATE SET holder = excluded.holder, \
               epoch = excluded.epoch, expires_at = excluded.expires_at"
        ),
    );
}

/// The epoch a refused write was made under (0: refused before the database).
fn fenced(outcome: Result<Option<crate::store::StoredEvent>, StoreError>) -> i64 {
    match outcome {
        Err(StoreError::Fenced { epoch, .. }) => epoch.unwrap_or(0),
        other => panic!("not fenced: {other:?}"),
    }
}

#[tokio::test]
async fn an_upstreams_writes_land_only_under_its_unexpired_lease_at_the_writers_epoch() {
    let pg = Postgres::start();
    pg.create_database("hub");
    let (fa, fb) = (
        Arc::new(Fencing::new("replica-a".into()).unwrap()),
        Arc::new(Fencing::new("replica-b".into()).unwrap()),
    );
    let (_da, a) = replica_with(&pg, Wakeup::Listen, Some(fa.clone())).await;
    let (_db, b) = replica_with(&pg, Wakeup::Listen, Some(fb.clone())).await;
    // Held by neither: refused before the database.
    assert_eq!(
        fenced(a.mirror_put(&key("east", "x"), device("x", 1)).await),
        0
    );
    lease(&pg, "replica-a", 1, 3600);
    let lost_a = fa.hold("east", 1);
    put(&a, "east", "x", 1)
        .await
        .expect("written under the lease");
    // B believes it holds epoch 1 too (a stale belief): the database says otherwise.
    fb.hold("east", 1);
    assert_eq!(
        fenced(b.mirror_put(&key("east", "y"), device("y", 1)).await),
        1
    );
    assert_eq!(fb.refused_batches().with_label_values(&["east"]).get(), 1);
    assert!(
        fb.fence("east").is_err(),
        "B's mirror of east is told to stop"
    );
    // B takes over at epoch 2: A's next batch is refused, A's holder told, nothing written.
    lease(&pg, "replica-b", 2, 3600);
    fb.hold("east", 2);
    assert_eq!(
        fenced(a.mirror_put(&key("east", "x"), device("x", 2)).await),
        1
    );
    tokio::time::timeout(Duration::from_secs(5), lost_a.notified())
        .await
        .expect("A is told its lease is gone");
    put(&b, "east", "x", 3).await.expect("B writes at epoch 2");
    // The fleet view's own writes (CRDs) are no upstream's: never fenced.
    put(&a, FLEET, "crd", 1).await.expect("unfenced");
    // An expired lease fences its own holder.
    lease(&pg, "replica-b", 2, -1);
    assert_eq!(
        fenced(b.mirror_put(&key("east", "x"), device("x", 4)).await),
        2
    );
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT string_agg(name || ':' || coalesce(epoch, 0), ',' ORDER BY rv) \
             FROM mirror_events WHERE cluster = 'east'"
        ),
        "x:1,x:2",
        "only the lease holders' writes, each with its epoch"
    );
    assert_eq!(
        pg.psql(
            "hub",
            "SELECT body::json->'spec'->>'x' FROM mirror_objects WHERE cluster = 'east'"
        ),
        "3"
    );
}

/// The (requested, compacted) versions of a read refused as too old.
fn expired<T>(r: Result<T, ReplayError>) -> (u64, u64) {
    match r {
        Err(ReplayError::Expired {
            requested,
            compacted,
        }) => (requested, compacted),
        Err(e) => panic!("expected 410, got {e}"),
        Ok(_) => panic!("expected 410, got an answer"),
    }
}

#[tokio::test]
async fn the_log_on_postgres_is_trimmed_and_reads_from_before_it_are_refused() {
    let pg = Postgres::start();
    pg.create_database("hub");
    let (_dir, store) = replica(&pg).await;
    store.join_fleet("east").await.unwrap();
    put(&store, "east", "a", 1).await.unwrap(); // 1
    put(&store, "east", "b", 1).await.unwrap(); // 2
    put(&store, "east", "a", 2).await.unwrap(); // 3
    put(&store, "east", "c", 1).await.unwrap(); // 4
    put(&store, "east", "a", 3).await.unwrap(); // 5
    let (grp, res) = ("worker.gpustack.ai", "devices");

    store.compact_within(2, u64::MAX).await.unwrap();
    let count = pg.psql("hub", "SELECT count(*) FROM mirror_events");
    assert_eq!(count.trim(), "2", "the newest two events are kept");
    // A watch from before the trim is refused; from the trim on, it replays what is left.
    assert_eq!(
        expired(store.events_since("east", grp, res, 0).await),
        (0, 3)
    );
    assert_eq!(
        expired(store.events_since(FLEET, grp, res, 2).await),
        (2, 3)
    );
    let left: Vec<_> = store
        .events_since("east", grp, res, 3)
        .await
        .unwrap()
        .iter()
        .map(|e| (e.rv, e.key.name.clone()))
        .collect();
    assert_eq!(left, [(4, "c".to_string()), (5, "a".to_string())]);
    // A list at a version before the trim, or one whose objects' states then were trimmed
    // (a's at 4 is its event at 3), is refused; at the newest version it is answered.
    assert_eq!(
        expired(store.list_raw_at("east", grp, res, None, None, 0, 2).await),
        (2, 3)
    );
    assert_eq!(
        expired(store.list_raw_at("east", grp, res, None, None, 0, 4).await),
        (4, 3)
    );
    let at_five = store
        .list_raw_at("east", grp, res, None, None, 0, 5)
        .await
        .unwrap();
    assert_eq!(
        seen(&at_five.items),
        [
            ("a".into(), 3, "5".into()),
            ("b".into(), 1, "2".into()),
            ("c".into(), 1, "4".into())
        ]
    );
    // The objects themselves are untouched, and trimming again removes nothing more.
    let now = store
        .list_raw("east", grp, res, None, None, 0)
        .await
        .unwrap();
    assert_eq!(seen(&now.items), seen(&at_five.items));
    store.compact_within(2, u64::MAX).await.unwrap();
    let count = pg.psql("hub", "SELECT count(*) FROM mirror_events");
    assert_eq!(count.trim(), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_tailer_the_trim_overtook_ends_its_watches() {
    let pg = Postgres::start();
    pg.create_database("hub");
    let (_d1, writer) = replica(&pg).await;
    writer.join_fleet("east").await.unwrap();
    // Reads the log only every 2 s: the other replica writes and trims meanwhile.
    let (_d2, behind) = replica_waking(&pg, Wakeup::Poll(Duration::from_secs(2))).await;
    let epoch = behind.watch_epoch();
    let mut round = 0;
    let ended = || {
        round += 1;
        let (writer, changed) = (writer.clone(), epoch.has_changed().unwrap());
        async move {
            if changed {
                return Some(());
            }
            for i in 0..20 {
                put(&writer, "east", &format!("r{round}-{i}"), 1)
                    .await
                    .unwrap();
            }
            writer.compact_within(1, u64::MAX).await.unwrap();
            None
        }
    };
    gpustack_tests::wait::until(
        "the lagging replica's watches ended",
        Duration::from_secs(30),
        ended,
    )
    .await;
}
