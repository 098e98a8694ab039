-- Engine line, version 2 (SQLite): flow control and fair claiming.
-- Timestamps INTEGER unix microseconds, durations INTEGER milliseconds.

-- Claims go key by key (fairness): this index serves both the skip scan that
-- lists keys with backlog and the per-key claim in (priority, id) order. Jobs
-- without a flow key sit under NULL and are claimed the same way.
CREATE INDEX keel_job_key_claim_idx ON keel_job (queue, flow_key, priority, id) WHERE state = 'available';
-- Concurrency limits count a key's running jobs.
CREATE INDEX keel_job_key_running_idx ON keel_job (flow_key) WHERE state = 'running';
-- Ageing: the priority a job was inserted with, once it has been raised.
-- Never indexed, so that the down migration can drop it.
ALTER TABLE keel_job ADD COLUMN base_priority INTEGER;

CREATE TABLE keel_flow_limit (
    pattern              TEXT    NOT NULL,
    queue                TEXT    NOT NULL DEFAULT '',
    rate                 REAL    NOT NULL DEFAULT 0 CHECK (rate >= 0),
    burst                INTEGER NOT NULL DEFAULT 0 CHECK (burst >= 0),
    max_running          INTEGER NOT NULL DEFAULT 0 CHECK (max_running >= 0),
    breaker_failures     INTEGER NOT NULL DEFAULT 0 CHECK (breaker_failures >= 0),
    breaker_ratio        REAL    NOT NULL DEFAULT 0 CHECK (breaker_ratio BETWEEN 0 AND 1),
    breaker_window_ms    INTEGER NOT NULL DEFAULT 0 CHECK (breaker_window_ms >= 0),
    breaker_min_calls    INTEGER NOT NULL DEFAULT 0 CHECK (breaker_min_calls >= 0),
    breaker_cooldown_ms  INTEGER NOT NULL DEFAULT 0 CHECK (breaker_cooldown_ms >= 0),
    breaker_probes       INTEGER NOT NULL DEFAULT 0 CHECK (breaker_probes >= 0),
    autopause_failures   INTEGER NOT NULL DEFAULT 0 CHECK (autopause_failures >= 0),
    weight               INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    ramp                 TEXT    NOT NULL DEFAULT '[]',
    updated_at           INTEGER NOT NULL,
    updated_by           TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (pattern, queue)
);

-- key is NOT NULL explicitly: SQLite lets a non-INTEGER PRIMARY KEY hold NULL.
CREATE TABLE keel_flow_key (
    key                   TEXT    NOT NULL PRIMARY KEY,
    tokens                REAL    NOT NULL DEFAULT 0,
    tokens_at             INTEGER,
    paused_at             INTEGER,
    paused_by             TEXT    NOT NULL DEFAULT '',
    pause_reason          TEXT    NOT NULL DEFAULT '',
    pause_context         TEXT    NOT NULL DEFAULT '{}',
    breaker_state         TEXT    NOT NULL DEFAULT 'closed' CHECK (breaker_state IN ('closed', 'open', 'half_open')),
    breaker_opened_at     INTEGER,
    breaker_probes_left   INTEGER NOT NULL DEFAULT 0,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    window_start          INTEGER,
    window_calls          INTEGER NOT NULL DEFAULT 0,
    window_failures       INTEGER NOT NULL DEFAULT 0,
    ramp_started_at       INTEGER,
    last_error            TEXT    NOT NULL DEFAULT '',
    last_failure_class    TEXT    NOT NULL DEFAULT '',
    last_failure_at       INTEGER,
    last_success_at       INTEGER,
    updated_at            INTEGER NOT NULL
);
-- Claims exclude gated keys (paused, breaker open) with one probe of this
-- small index.
CREATE INDEX keel_flow_key_gate_idx ON keel_flow_key (key) WHERE paused_at IS NOT NULL OR breaker_state = 'open';
