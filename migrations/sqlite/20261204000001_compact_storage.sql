-- Storage sized for a fleet (issue 17).
--
-- Objects move to a rowid table: a WITHOUT ROWID table keeps rows in an index b-tree, where a
-- row over ~1 KB spills into an overflow page of its own, so a 2 KB object took ~5 KB on disk.
-- `hash` is a digest of a mirrored object's content without its resourceVersion: an unchanged
-- relisted object is recognized in SQL, without reading it back.
CREATE TABLE objects_v2 (
    cluster   TEXT NOT NULL,
    grp       TEXT NOT NULL,
    resource  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    rv        INTEGER NOT NULL,
    body      TEXT NOT NULL,
    hash      INTEGER
);
INSERT INTO objects_v2 (cluster, grp, resource, namespace, name, rv, body)
SELECT cluster, grp, resource, namespace, name, rv, body FROM objects;
DROP TABLE objects;
ALTER TABLE objects_v2 RENAME TO objects;
CREATE UNIQUE INDEX objects_by_key ON objects (cluster, grp, resource, namespace, name);

-- Events refer to their object instead of repeating its body: `body` is NULL while the
-- object's row is still at the event's version, or (after its mirror deleted it) when the
-- next event of the object, its DELETED event, holds the same state. An object's change
-- first fills in the body of the event that referred to its row.
CREATE TABLE events_v2 (
    rv        INTEGER PRIMARY KEY,
    cluster   TEXT NOT NULL,
    grp       TEXT NOT NULL,
    resource  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    type      TEXT NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
    body      TEXT
);
INSERT INTO events_v2 SELECT rv, cluster, grp, resource, namespace, name, type, body FROM events;
DROP TABLE events;
ALTER TABLE events_v2 RENAME TO events;
CREATE INDEX events_by_resource ON events (cluster, grp, resource, rv);
CREATE INDEX events_by_key ON events (cluster, grp, resource, namespace, name, rv);

-- The event log's size in bytes (bodies plus 64 per event), for --event-log-max-bytes.
ALTER TABLE sequence ADD COLUMN event_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE sequence SET event_bytes =
    (SELECT COALESCE(SUM(COALESCE(length(CAST(body AS BLOB)), 0) + 64), 0) FROM events);
CREATE TRIGGER events_bytes_added AFTER INSERT ON events BEGIN
    UPDATE sequence SET event_bytes = event_bytes + COALESCE(length(CAST(NEW.body AS BLOB)), 0) + 64
    WHERE id = 0;
END;
CREATE TRIGGER events_bytes_dropped AFTER DELETE ON events BEGIN
    UPDATE sequence SET event_bytes = event_bytes - COALESCE(length(CAST(OLD.body AS BLOB)), 0) - 64
    WHERE id = 0;
END;
CREATE TRIGGER events_bytes_filled AFTER UPDATE OF body ON events BEGIN
    UPDATE sequence SET event_bytes = event_bytes + COALESCE(length(CAST(NEW.body AS BLOB)), 0)
        - COALESCE(length(CAST(OLD.body AS BLOB)), 0)
    WHERE id = 0;
END;
