-- Server line, version 1 (PostgreSQL): API tokens and console sessions.
-- Secrets are never stored: only SHA-256 hashes of high-entropy values.
-- Timestamps are BIGINT unix microseconds (UTC), as on SQLite, so the one
-- store serves both dialects.

CREATE TABLE keel_api_token (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         TEXT   NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    role         TEXT   NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    hash         TEXT   NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    created_by   TEXT   NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);

CREATE TABLE keel_session (
    hash         TEXT   PRIMARY KEY,
    token_id     BIGINT NOT NULL REFERENCES keel_api_token (id) ON DELETE CASCADE,
    csrf         TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);

CREATE INDEX keel_session_expires_idx ON keel_session (expires_at);
