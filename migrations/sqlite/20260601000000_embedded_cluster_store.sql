-- The embedded-cluster store: objects of every hosted cluster, the event log that watches resume
-- from, and the cluster-wide resourceVersion sequence.

CREATE TABLE clusters (
    name         TEXT PRIMARY KEY NOT NULL,
    -- SHA-256 (hex) of the admin bearer token; the token itself is never stored.
    token_sha256 TEXT NOT NULL,
    created_at   TEXT NOT NULL
);

-- One row; `rv` is the last resourceVersion handed out, `compacted_rv` the newest version whose
-- events may be gone from `events` (a watch from an older version answers 410 Gone).
CREATE TABLE sequence (
    id           INTEGER PRIMARY KEY CHECK (id = 0),
    rv           INTEGER NOT NULL,
    compacted_rv INTEGER NOT NULL
);
INSERT INTO sequence (id, rv, compacted_rv) VALUES (0, 0, 0);

-- Current objects. `namespace` is '' for cluster-scoped kinds. `body` is the JSON object as served.
CREATE TABLE objects (
    cluster   TEXT NOT NULL,
    grp       TEXT NOT NULL,
    resource  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    rv        INTEGER NOT NULL,
    body      TEXT NOT NULL,
    PRIMARY KEY (cluster, grp, resource, namespace, name)
) WITHOUT ROWID;

-- Every committed change, keyed by the resourceVersion it produced; compacted from the front.
CREATE TABLE events (
    rv        INTEGER PRIMARY KEY,
    cluster   TEXT NOT NULL,
    grp       TEXT NOT NULL,
    resource  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    type      TEXT NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
    body      TEXT NOT NULL
);
CREATE INDEX events_by_resource ON events (cluster, grp, resource, rv);
