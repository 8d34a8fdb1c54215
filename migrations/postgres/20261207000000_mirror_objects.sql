-- The mirrored objects, their event log and the fleet view's members on PostgreSQL
-- (`worker-gateway --store=postgres://...`): what the SQLite store keeps in `objects`, `events`,
-- `sequence` and `fleet_members` for a hub on SQLite. Names sort bytewise ("C"), as SQLite's
-- do: list pages continue after a (namespace, name) and must see the same order everywhere.

-- One sequence of resourceVersions for every replica: a write batch takes its versions while it
-- holds this row's lock, so versions are handed out in commit order.
CREATE TABLE mirror_sequence (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    rv BIGINT NOT NULL
);
INSERT INTO mirror_sequence (id, rv) VALUES (0, 0);

-- The current objects; `body` is the JSON text at version `rv`, `hash` a digest of its content
-- without its resourceVersion (an unchanged relist writes nothing).
CREATE TABLE mirror_objects (
    cluster   TEXT COLLATE "C" NOT NULL,
    grp       TEXT COLLATE "C" NOT NULL,
    resource  TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    name      TEXT COLLATE "C" NOT NULL,
    rv        BIGINT NOT NULL,
    hash      BIGINT NOT NULL,
    body      TEXT NOT NULL,
    PRIMARY KEY (cluster, grp, resource, namespace, name)
);

-- Every change, in version order: what watches resume from and lists at a snapshot read back.
-- `body` is the object after the change (a DELETED event: its last state); `prev_rv` the
-- version the change replaced (MODIFIED and DELETED), whose event holds the state before it.
CREATE TABLE mirror_events (
    rv        BIGINT PRIMARY KEY,
    cluster   TEXT COLLATE "C" NOT NULL,
    grp       TEXT COLLATE "C" NOT NULL,
    resource  TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    name      TEXT COLLATE "C" NOT NULL,
    type      TEXT NOT NULL,
    prev_rv   BIGINT,
    body      TEXT NOT NULL
);
CREATE INDEX mirror_events_by_collection ON mirror_events (cluster, grp, resource, rv);

-- The upstreams whose objects make up the fleet view.
CREATE TABLE mirror_fleet_members (
    cluster TEXT COLLATE "C" PRIMARY KEY
);
