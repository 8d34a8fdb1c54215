-- The fleet view is derived from its members' rows at read time (gateway/src/store/fleet.rs)
-- instead of storing a second copy of every mirrored object. A cluster stays a member after its
-- mirror is dropped, so that the deletions of its objects still replay to fleet watchers.
CREATE TABLE fleet_members (
    cluster TEXT PRIMARY KEY NOT NULL
) WITHOUT ROWID;

INSERT OR IGNORE INTO fleet_members (cluster) SELECT cluster FROM upstream_sync;
INSERT OR IGNORE INTO fleet_members (cluster) SELECT DISTINCT cluster FROM mirror_progress;

-- The copies the fleet view used to store (its CRDs stay: they are its own).
DELETE FROM objects WHERE cluster = '_fleet' AND resource <> 'customresourcedefinitions';
DELETE FROM events WHERE cluster = '_fleet' AND resource <> 'customresourcedefinitions';
