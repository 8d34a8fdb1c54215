//! Collection's first steps, run by `Materializer::collect` on a real cache root: a partial
//! download untouched for more than a day goes (through the trash), a fresh one stays; a
//! failure record older than a day for a digest no longer on disk is dropped, a recent one and
//! one whose partial is still on disk stay.

use std::{
    path::Path,
    time::{Duration, SystemTime},
};

use gpustack_model_manager::{
    download::{DownloadLimits, Tuning},
    gc::Watermarks,
    manifest::ManifestDigest,
    materializer::{Materializer, StoreConfig},
    store::{DigestRecord, Store},
};
use jiff::Timestamp;

const TWO_DAYS: Duration = Duration::from_secs(2 * 24 * 3600);

/// Sets the modification time of `path` and everything under it.
fn age(path: &Path, when: SystemTime) {
    let mut pending = vec![path.to_path_buf()];
    while let Some(p) = pending.pop() {
        if p.is_dir() {
            pending.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
        std::fs::File::open(&p).unwrap().set_modified(when).unwrap();
    }
}

fn digest(c: char) -> ManifestDigest {
    ManifestDigest::from_hex(&c.to_string().repeat(64)).unwrap()
}

fn partial_with_a_file(store: &Store, d: &ManifestDigest) {
    let tree = store.attempt_dir(d, 1).join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::create_dir_all(store.attempt_dir(d, 1).join("state")).unwrap();
    std::fs::write(tree.join("model.safetensors"), vec![7u8; 4096]).unwrap();
}

fn failure_record(store: &Store, d: &ManifestDigest, when: Timestamp) {
    store
        .write_digest_record(
            d,
            &DigestRecord {
                last_attempt: 1,
                failures: 1,
                reason: "SourceUnavailable".into(),
                message: "HTTP 503".into(),
                retry_time: Some(when),
                ..Default::default()
            },
        )
        .unwrap();
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn collection_removes_stale_partials_and_old_failure_records() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let store = Store::open(&root).unwrap();
    let long_ago = SystemTime::now() - TWO_DAYS;
    let long_ago_ts = Timestamp::try_from(long_ago).unwrap();

    let (stale, fresh, old_record, new_record) =
        (digest('a'), digest('b'), digest('c'), digest('d'));
    partial_with_a_file(&store, &stale);
    age(&store.partial_dir(&stale), long_ago);
    partial_with_a_file(&store, &fresh);
    failure_record(&store, &old_record, long_ago_ts);
    age(&store.digest_record_path(&old_record), long_ago);
    failure_record(&store, &new_record, Timestamp::now());
    // An old record whose partial is still on disk is kept with it.
    failure_record(&store, &fresh, long_ago_ts);
    age(&store.digest_record_path(&fresh), long_ago);

    let m = Materializer::new(
        store,
        DownloadLimits::new(8, 0),
        Tuning::default(),
        StoreConfig {
            // Trees are not the subject here: nothing is over the high watermark.
            watermarks: Watermarks {
                high_percent: 100,
                low_percent: 99,
            },
            ..StoreConfig::default()
        },
    );
    let plan = m.collect(0, &m.config()).await;
    assert!(plan.remove.is_empty(), "{:?}", plan.remove);

    let store = m.store();
    assert!(
        !store.partial_dir(&stale).exists(),
        "a partial untouched for two days is removed"
    );
    assert!(
        store
            .attempt_dir(&fresh, 1)
            .join("tree/model.safetensors")
            .exists(),
        "a fresh partial is kept"
    );
    assert!(
        entries(&root.join("trash")).is_empty(),
        "the trash is emptied"
    );
    let kept: Vec<ManifestDigest> = store
        .digest_records()
        .unwrap()
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    assert!(
        !kept.contains(&old_record),
        "an old record of a digest gone from disk is dropped"
    );
    assert!(kept.contains(&new_record), "a recent record is kept");
    assert!(kept.contains(&fresh), "a record with its partial is kept");

    // A second pass finds nothing more to do.
    m.collect(0, &m.config()).await;
    assert!(store.partial_dir(&fresh).exists());
    assert_eq!(store.digest_records().unwrap().len(), 2);
}
