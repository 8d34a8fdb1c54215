//! Synthetic benchmark of the hub's store at fleet scale (issue 17), not a pass/fail test:
//! upstreams x Devices (~2 KB each) written straight through the mirror's write path
//! (`Store::mirror_put`, as many at once as a relist has in flight, so the writer batches them
//! as it does a mirror's), at each size of a doubling series up to the full one, each in a
//! fresh database. Reproduce with
//!
//! ```text
//! cargo bench -p gpustack-apiserver --bench fleet_scale
//! ```
//!
//! (`GPUSTACK_BENCH_FLEET_UPSTREAMS`, default 100, and `GPUSTACK_BENCH_FLEET_DEVICES`, default
//! 10000 per upstream, set the full size; `GPUSTACK_BENCH_FLEET_FROM`, default 50000, the
//! smallest). Per size: the write rate, the database on disk per object against the object's
//! JSON size, this process's resident memory and the heap it holds live, a full fleet list
//! (streamed, as the API serves it), and the time to resync one upstream after a restart (the
//! store reopened, the upstream's objects written again unchanged and swept, as a relist
//! does).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use futures::future::join_all;
use gpustack_apiserver::store::{
    ObjectKey, Store, compaction::files_bytes, fleet::FLEET, mirror::SeenNames,
};
use gpustack_tests::bench::{
    Figure, device, env_usize, heap_in_use_mb, proc_status_mb, rss_breakdown, trim_heap,
};

const GROUP: &str = "worker.gpustack.ai";
const RESOURCE: &str = "devices";

/// How many writes one upstream has in flight (a relist's page).
const IN_FLIGHT: usize = 500;

/// How many upstreams are written at once.
const UPSTREAMS_AT_ONCE: usize = 10;

fn key(upstream: usize, i: usize) -> ObjectKey {
    ObjectKey {
        cluster: format!("u{upstream:03}"),
        group: GROUP.into(),
        resource: RESOURCE.into(),
        namespace: String::new(),
        name: format!("node-{i:05}"),
    }
}

/// Writes upstream `u`'s `per` Devices; returns how many were written (not unchanged).
async fn write_upstream(store: &Store, u: usize, per: usize) -> usize {
    let mut written = 0;
    let indexes: Vec<usize> = (0..per).collect();
    for chunk in indexes.chunks(IN_FLIGHT) {
        let writes = chunk.iter().map(|&i| {
            let key = key(u, i);
            let body = device(&key.name);
            async move {
                store
                    .mirror_put(&key, body)
                    .await
                    .expect("a mirrored write")
            }
        });
        written += join_all(writes).await.iter().flatten().count();
    }
    written
}

struct Measured {
    objects: usize,
    write_rate: f64,
    disk_ratio: f64,
    rss_mb: f64,
    rss_parts: String,
    trimmed_mb: f64,
    heap_mb: f64,
    list: Duration,
    resync: Duration,
}

async fn measure(dir: &Path, upstreams: usize, per: usize, object_bytes: usize) -> Measured {
    let db = dir.join(format!("hub-{upstreams}x{per}.db"));
    let store = Store::open(&db).await.expect("the store opens");
    for u in 0..upstreams {
        store.join_fleet(&key(u, 0).cluster).await.unwrap();
    }
    let start = Instant::now();
    let ids: Vec<usize> = (0..upstreams).collect();
    for group in ids.chunks(UPSTREAMS_AT_ONCE) {
        join_all(group.iter().map(|&u| write_upstream(&store, u, per))).await;
    }
    let objects = upstreams * per;
    let write_rate = objects as f64 / start.elapsed().as_secs_f64();
    // What the hub's periodic compaction does.
    store
        .compact_within(100_000, gpustack_apiserver::server::DEFAULT_EVENT_LOG_BYTES)
        .await
        .unwrap();
    while store.reclaim().await.unwrap() > 0 {}
    let disk_ratio = files_bytes(&db) as f64 / (objects * object_bytes) as f64;

    let start = Instant::now();
    let (_, mut rows) = store
        .stream_raw(FLEET, GROUP, RESOURCE, None)
        .await
        .unwrap();
    let mut listed = 0;
    while let Some(page) = rows.recv().await {
        listed += page.unwrap().len();
    }
    let list = start.elapsed();
    assert_eq!(listed, objects);
    let rss_mb = proc_status_mb(std::process::id(), "VmRSS");
    let rss_parts = rss_breakdown(std::process::id());
    let heap_mb = heap_in_use_mb();
    trim_heap();
    let trimmed_mb = proc_status_mb(std::process::id(), "VmRSS");

    store.close().await;
    drop(store);
    let start = Instant::now();
    let store = Store::open(&db).await.unwrap();
    let rewritten = write_upstream(&store, 0, per).await;
    let mut keep = SeenNames::default();
    for i in 0..per {
        keep.insert("", &key(0, i).name);
    }
    let swept = store
        .mirror_sweep(&key(0, 0).cluster, GROUP, RESOURCE, &keep)
        .await
        .unwrap();
    let resync = start.elapsed();
    assert_eq!(
        (rewritten, swept),
        (0, 0),
        "a resync of unchanged objects writes nothing"
    );
    store.close().await;
    drop(store);
    let _ = std::fs::remove_file(&db);
    Measured {
        objects,
        write_rate,
        disk_ratio,
        rss_mb,
        rss_parts,
        trimmed_mb,
        heap_mb,
        list,
        resync,
    }
}

/// Whether the memory held at `last`'s size is about that at `first`'s: the resident size once
/// malloc gave back what it kept free, and the heap in use (a few MB, so a growth under 5 MB
/// also passes). The resident size as found is reported, not judged: it also counts what the
/// allocator kept from this bench's own writers, 500 bodies in flight per upstream.
fn flat_memory(first: &Measured, last: &Measured) -> bool {
    let heap_flat = last.heap_mb <= first.heap_mb * 1.5 || last.heap_mb - first.heap_mb < 5.0;
    last.trimmed_mb <= first.trimmed_mb * 1.5 && heap_flat
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let upstreams = env_usize("GPUSTACK_BENCH_FLEET_UPSTREAMS", 100).max(1);
    let per = env_usize("GPUSTACK_BENCH_FLEET_DEVICES", 10_000).max(1);
    let from = env_usize("GPUSTACK_BENCH_FLEET_FROM", 50_000).max(1);
    let object_bytes = serde_json::to_string(&device("node-00000")).unwrap().len();
    let dir = tempfile::tempdir().unwrap();
    println!(
        "data: {} (object size {object_bytes} bytes)",
        dir.path().display()
    );
    // Sizes from `from` doubling up to the full one, at `per` Devices per upstream.
    let mut sizes = Vec::new();
    let mut n = from.div_ceil(per).clamp(1, upstreams);
    while n < upstreams {
        sizes.push(n);
        n *= 2;
    }
    sizes.push(upstreams);
    let mut figures = Vec::new();
    let mut runs: Vec<Measured> = Vec::new();
    for u in sizes {
        let m = measure(dir.path(), u, per, object_bytes).await;
        figures.push(Figure::new(
            format!("{u} upstreams x {per} Devices ({} objects)", m.objects),
            format!(
                "written at {:.0} objects/s; disk {:.2}x the JSON; resident {:.0} MB ({}), {:.0} MB once malloc gave back what it kept free, heap in use {:.0} MB; full fleet list {:.1?}; one upstream resynced after a restart in {:.1?}",
                m.write_rate, m.disk_ratio, m.rss_mb, m.rss_parts, m.trimmed_mb, m.heap_mb, m.list, m.resync
            ),
            None,
            Some(true),
        ));
        runs.push(m);
    }
    if let (Some(first), Some(last)) = (runs.first(), runs.last()) {
        let scale = last.objects as f64 / first.objects as f64;
        figures.push(Figure::new(
            format!(
                "scaling {} -> {} objects ({scale:.0}x)",
                first.objects, last.objects
            ),
            format!(
                "disk per object {:.2}x, resident {:.2}x ({:.2}x once malloc gave back what it kept free), heap in use {:.2}x, list time {:.1}x, resync time {:.2}x",
                last.disk_ratio / first.disk_ratio,
                last.rss_mb / first.rss_mb,
                last.trimmed_mb / first.trimmed_mb,
                last.heap_mb / first.heap_mb,
                last.list.as_secs_f64() / first.list.as_secs_f64(),
                last.resync.as_secs_f64() / first.resync.as_secs_f64(),
            ),
            Some("linear disk (per object 1x), flat memory (what is held: resident once malloc gave back what it kept free, and the heap in use)"),
            Some(last.disk_ratio / first.disk_ratio <= 1.2 && flat_memory(first, last)),
        ));
    }
    println!("\nsummary (reproduce: cargo bench -p gpustack-apiserver --bench fleet_scale):");
    for f in &figures {
        println!("  {}", f.line());
    }
}
