-- Engine line, version 1 (SQLite). Timestamps are INTEGER unix microseconds
-- (UTC) so that comparisons and indexes are exact and cheap; JSON is TEXT.

CREATE TABLE IF NOT EXISTS keel_migration (
    line       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (line, version)
);

CREATE TABLE keel_job (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 128),
    queue             TEXT    NOT NULL DEFAULT 'default' CHECK (length(queue) BETWEEN 1 AND 128),
    args              TEXT    NOT NULL DEFAULT '{}',
    metadata          TEXT    NOT NULL DEFAULT '{}',
    state             TEXT    NOT NULL DEFAULT 'available' CHECK (state IN ('scheduled','available','running',
                          'retryable','waiting','unknown','manual','completed','failed','cancelled','skipped')),
    priority          INTEGER NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    run_at            INTEGER NOT NULL,
    attempt           INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts      INTEGER NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
    fence             INTEGER NOT NULL DEFAULT 0,
    lease_owner       TEXT,
    lease_expires_at  INTEGER,
    idempotency_key   TEXT,
    flow_key          TEXT,
    batch_id          INTEGER,
    subject           TEXT,
    wait_reason       TEXT,
    wait_deadline     INTEGER,
    needs_check       INTEGER NOT NULL DEFAULT 0,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    result            TEXT,
    errors            TEXT    NOT NULL DEFAULT '[]',
    created_at        INTEGER NOT NULL,
    attempted_at      INTEGER,
    finalized_at      INTEGER
);

CREATE INDEX keel_job_claim_idx ON keel_job (queue, priority, id) WHERE state = 'available';
CREATE INDEX keel_job_due_idx ON keel_job (run_at) WHERE state IN ('scheduled','retryable','unknown');
CREATE INDEX keel_job_wait_idx ON keel_job (wait_deadline) WHERE state = 'waiting';
CREATE INDEX keel_job_wait_key_idx ON keel_job (flow_key, wait_reason) WHERE state = 'waiting';
CREATE INDEX keel_job_lease_idx ON keel_job (lease_expires_at) WHERE state = 'running';
CREATE INDEX keel_job_finalized_idx ON keel_job (finalized_at) WHERE finalized_at IS NOT NULL;
CREATE UNIQUE INDEX keel_job_idempotency_idx ON keel_job (kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX keel_job_state_idx ON keel_job (state, queue);
CREATE INDEX keel_job_kind_idx ON keel_job (kind, id);
CREATE INDEX keel_job_flow_key_idx ON keel_job (flow_key, id) WHERE flow_key IS NOT NULL;
CREATE UNIQUE INDEX keel_job_batch_subject_idx ON keel_job (batch_id, subject) WHERE batch_id IS NOT NULL;

CREATE TABLE keel_queue (
    name       TEXT    PRIMARY KEY,
    paused_at  INTEGER,
    paused_by  TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE keel_leader (
    name       TEXT    PRIMARY KEY,
    leader_id  TEXT    NOT NULL,
    elected_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE keel_audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL,
    action  TEXT    NOT NULL,
    target  TEXT    NOT NULL DEFAULT '',
    reason  TEXT    NOT NULL DEFAULT '',
    context TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX keel_audit_action_idx ON keel_audit (action, id);
CREATE INDEX keel_audit_target_idx ON keel_audit (target, id);
CREATE INDEX keel_audit_at_idx ON keel_audit (at);
