-- Several hub replicas on one database (`worker-gateway --store=postgres://...`): each upstream
-- is mirrored by one replica at a time, under a lease kept here.
--
-- `holder` is the replica's id (made at its start, shown in its log); `epoch` the fencing
-- token, one more at each take-over; `expires_at` is computed with the database's clock only
-- (clock_timestamp() + the lease time), so the replicas' clocks never matter. Every write
-- batch of an upstream's mirror checks, in its transaction, that its writer still holds the
-- lease at its epoch and that it has not expired.
CREATE TABLE mirror_leases (
    upstream   TEXT COLLATE "C" PRIMARY KEY,
    holder     TEXT NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

-- Which lease epoch wrote each event (NULL: a write of no upstream's lease, such as a fleet
-- CRD): an upstream's writers can be told apart, and a fenced replica's writes would show.
ALTER TABLE mirror_events ADD COLUMN epoch BIGINT;
