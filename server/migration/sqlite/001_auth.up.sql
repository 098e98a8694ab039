-- Server line, version 1 (SQLite): API tokens and console sessions.
-- Secrets are never stored: only SHA-256 hashes of high-entropy values.
-- Timestamps are INTEGER unix microseconds (UTC).

CREATE TABLE keel_api_token (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    role         TEXT    NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    hash         TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    created_by   TEXT    NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

CREATE TABLE keel_session (
    hash         TEXT    PRIMARY KEY,
    token_id     INTEGER NOT NULL REFERENCES keel_api_token (id) ON DELETE CASCADE,
    csrf         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);

CREATE INDEX keel_session_expires_idx ON keel_session (expires_at);
