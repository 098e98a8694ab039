-- Engine line, version 4 (SQLite): bulk tasks (batches). See the PostgreSQL
-- migration for the design. SQLite has one writer, so counters are kept as
-- one row per (batch, bucket) updated in place by triggers on keel_job, in
-- the transaction of each item transition. The bucket expression is written
-- out in each trigger (SQLite triggers cannot call SQL functions of ours);
-- keelsqlite/queries/batch.sql repeats it for the recount and the filters.

CREATE TABLE keel_batch (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                TEXT    NOT NULL,
    name                TEXT    NOT NULL DEFAULT '',
    reason              TEXT    NOT NULL CHECK (length(reason) >= 5),
    filter              TEXT    NOT NULL DEFAULT '{}',
    filter_hash         TEXT    NOT NULL DEFAULT '',
    snapshot_at         INTEGER NOT NULL,
    created_by          TEXT    NOT NULL,
    queue               TEXT    NOT NULL DEFAULT 'default',
    rate                REAL    NOT NULL DEFAULT 0 CHECK (rate >= 0),
    autopause_failures  INTEGER NOT NULL DEFAULT 0 CHECK (autopause_failures >= 0),
    pause_on_key_pause  INTEGER NOT NULL DEFAULT 0,
    preview             TEXT    NOT NULL DEFAULT '{}',
    state               TEXT    NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'paused',
                            'completed', 'partial_completed', 'terminated')),
    materialized        INTEGER NOT NULL DEFAULT 0,
    pause_reason        TEXT    NOT NULL DEFAULT '',
    pause_context       TEXT    NOT NULL DEFAULT '{}',
    last_error          TEXT    NOT NULL DEFAULT '',
    created_at          INTEGER NOT NULL,
    started_at          INTEGER,
    paused_at           INTEGER,
    completed_at        INTEGER,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX keel_batch_state_idx ON keel_batch (state, id);

CREATE TABLE keel_batch_count (
    batch_id INTEGER NOT NULL,
    bucket   TEXT    NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (batch_id, bucket)
) WITHOUT ROWID;

CREATE TRIGGER keel_job_batch_insert AFTER INSERT ON keel_job
WHEN NEW.batch_id IS NOT NULL
BEGIN
    INSERT INTO keel_batch_count (batch_id, bucket, n)
    VALUES (NEW.batch_id, CASE NEW.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE NEW.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(NEW.result) AND NEW.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END, 1)
    ON CONFLICT (batch_id, bucket) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER keel_job_batch_delete AFTER DELETE ON keel_job
WHEN OLD.batch_id IS NOT NULL
BEGIN
    INSERT INTO keel_batch_count (batch_id, bucket, n)
    VALUES (OLD.batch_id, CASE OLD.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE OLD.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(OLD.result) AND OLD.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END, -1)
    ON CONFLICT (batch_id, bucket) DO UPDATE SET n = n - 1;
END;

CREATE TRIGGER keel_job_batch_update AFTER UPDATE OF state, wait_reason, result, batch_id ON keel_job
WHEN (NEW.batch_id IS NOT NULL OR OLD.batch_id IS NOT NULL)
 AND (NEW.batch_id IS NOT OLD.batch_id OR (CASE NEW.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE NEW.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(NEW.result) AND NEW.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END) IS NOT (CASE OLD.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE OLD.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(OLD.result) AND OLD.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END))
BEGIN
    INSERT INTO keel_batch_count (batch_id, bucket, n)
    SELECT OLD.batch_id, CASE OLD.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE OLD.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(OLD.result) AND OLD.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END, -1 WHERE OLD.batch_id IS NOT NULL
    ON CONFLICT (batch_id, bucket) DO UPDATE SET n = n - 1;
    INSERT INTO keel_batch_count (batch_id, bucket, n)
    SELECT NEW.batch_id, CASE NEW.state
        WHEN 'running' THEN 'processing' WHEN 'unknown' THEN 'processing'
        WHEN 'waiting' THEN CASE NEW.wait_reason WHEN 'connection' THEN 'waiting_connection'
            WHEN 'external_ack' THEN 'waiting_external_ack' WHEN 'ack' THEN 'waiting_ack' ELSE 'waiting' END
        WHEN 'completed' THEN 'success' WHEN 'failed' THEN 'failed' WHEN 'manual' THEN 'failed'
        WHEN 'skipped' THEN 'skipped'
        WHEN 'cancelled' THEN CASE WHEN json_valid(NEW.result) AND NEW.result ->> '$.reason' = 'batch_terminated'
            THEN 'unprocessed' ELSE 'failed' END
        ELSE 'queued' END, 1 WHERE NEW.batch_id IS NOT NULL
    ON CONFLICT (batch_id, bucket) DO UPDATE SET n = n + 1;
END;
