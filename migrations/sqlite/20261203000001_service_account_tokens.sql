-- Bound ServiceAccount tokens issued by embedded clusters (TokenRequest), by the SHA-256 of the
-- token: the token itself is never stored. A token names its cluster, ServiceAccount (and that
-- ServiceAccount's uid: a recreated account does not inherit tokens) and expiry.
CREATE TABLE service_account_tokens (
    token_sha256 TEXT PRIMARY KEY NOT NULL,
    cluster      TEXT NOT NULL,
    namespace    TEXT NOT NULL,
    name         TEXT NOT NULL,
    uid          TEXT NOT NULL,
    -- JSON list of strings.
    audiences    TEXT NOT NULL,
    -- Unix seconds.
    expires_at   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX service_account_tokens_expiry ON service_account_tokens (expires_at);
