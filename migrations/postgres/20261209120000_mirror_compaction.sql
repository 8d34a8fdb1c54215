-- The mirror's event log is trimmed to its newest events (any replica may trim it): `rv` is
-- the newest version trimmed away. Watches and snapshot lists from a version before it are
-- answered 410 Gone, so clients list again. A row of its own, not a column of
-- `mirror_sequence`, whose row every write batch holds locked until it commits.
CREATE TABLE mirror_compaction (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    rv BIGINT NOT NULL
);
INSERT INTO mirror_compaction (id, rv) VALUES (0, 0);
