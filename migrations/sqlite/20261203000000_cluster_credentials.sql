-- Per-cluster key material that no API request ever reads: the front-proxy CA (certificate and
-- key, PEM) an embedded cluster signs its aggregation client certificate with. The database file
-- is readable by its owner only.
CREATE TABLE cluster_credentials (
    cluster TEXT NOT NULL,
    name    TEXT NOT NULL,
    pem     TEXT NOT NULL,
    PRIMARY KEY (cluster, name)
) WITHOUT ROWID;
