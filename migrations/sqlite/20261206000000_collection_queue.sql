-- Owners deleted while objects still named them. The row is written in the transaction that
-- deletes the owner and removed once the collector has dealt with each dependent, so that
-- collection neither runs inside the deleting request nor is lost when that request's client
-- goes away or the process stops: the collector works the queue again after a restart.
CREATE TABLE collection_queue (
    cluster   TEXT NOT NULL,
    owner_uid TEXT NOT NULL,
    PRIMARY KEY (cluster, owner_uid)
) WITHOUT ROWID;
