-- Upstream subscriptions made through the API (`POST /apis/workers`), so that they survive a
-- restart. `spec` is the upstream as JSON, including its proxy token if any: the database file
-- is readable by its owner only.
CREATE TABLE subscriptions (
    name       TEXT PRIMARY KEY NOT NULL,
    spec       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- Where each mirrored kind's watch stopped: the upstream's resourceVersion, so that a restarted
-- gateway resumes the watch instead of relisting, while the upstream still has that version.
CREATE TABLE mirror_progress (
    cluster  TEXT NOT NULL,
    grp      TEXT NOT NULL,
    resource TEXT NOT NULL,
    rv       TEXT NOT NULL,
    PRIMARY KEY (cluster, grp, resource)
) WITHOUT ROWID;

-- When each upstream's mirror was last known to match it, kept across restarts for status.
CREATE TABLE upstream_sync (
    cluster        TEXT PRIMARY KEY NOT NULL,
    last_sync_time TEXT NOT NULL
);
