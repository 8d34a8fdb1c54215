-- The hub's bookkeeping on PostgreSQL (`worker-gateway --store=postgres://...`): the same three
-- tables as on SQLite (migrations/sqlite/20261202000000_subscriptions.sql), in one database that
-- outlives the gateway's data directory.

-- Upstream subscriptions made through the API (`POST /apis/workers`). `spec` is the upstream as
-- JSON, including its proxy token if any: grant this database to the hub's role only.
CREATE TABLE subscriptions (
    name       TEXT PRIMARY KEY,
    spec       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

-- Where each mirrored kind's watch stopped: the upstream's resourceVersion.
CREATE TABLE mirror_progress (
    cluster  TEXT NOT NULL,
    grp      TEXT NOT NULL,
    resource TEXT NOT NULL,
    rv       TEXT NOT NULL,
    PRIMARY KEY (cluster, grp, resource)
);

-- When each upstream's mirror was last known to match it (RFC 3339).
CREATE TABLE upstream_sync (
    cluster        TEXT PRIMARY KEY,
    last_sync_time TEXT NOT NULL
);
