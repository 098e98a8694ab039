-- Delivery line, version 2 (SQLite): a preview token creates at most one
-- requeue task (its SHA-256 is claimed by the primary key first).
CREATE TABLE dlv_task_token (
    digest     TEXT    PRIMARY KEY CHECK (length(digest) = 64),
    operator   TEXT    NOT NULL,
    batch_id   INTEGER,
    created_at INTEGER NOT NULL
);
