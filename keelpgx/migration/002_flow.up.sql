-- Engine line, version 2: flow control (per-key limits, state) and
-- fair claiming across flow keys.

-- Ageing: the priority a job was inserted with, once it has been raised.
-- First statement on keel_job on purpose: it takes the strongest lock
-- (ACCESS EXCLUSIVE) before CREATE INDEX takes SHARE, so two migrators
-- racing without the migration lock queue up instead of deadlocking on a
-- lock upgrade.
ALTER TABLE keel_job ADD COLUMN base_priority smallint;

-- Claims go key by key (fairness): this index serves both the skip scan
-- that lists keys with backlog and the per-key claim in priority order.
-- Jobs without a flow key sit under NULL and are claimed the same way.
CREATE INDEX keel_job_key_claim_idx ON keel_job (queue, flow_key, priority, id) WHERE state = 'available';
-- Concurrency limits count a key's running jobs under the key's lock.
CREATE INDEX keel_job_key_running_idx ON keel_job (flow_key) WHERE state = 'running';

CREATE TABLE keel_flow_limit (
    pattern              text             NOT NULL,
    queue                text             NOT NULL DEFAULT '',
    rate                 double precision NOT NULL DEFAULT 0,
    burst                integer          NOT NULL DEFAULT 0,
    max_running          integer          NOT NULL DEFAULT 0,
    breaker_failures     integer          NOT NULL DEFAULT 0,
    breaker_ratio        double precision NOT NULL DEFAULT 0,
    breaker_window_ms    bigint           NOT NULL DEFAULT 0,
    breaker_min_calls    integer          NOT NULL DEFAULT 0,
    breaker_cooldown_ms  bigint           NOT NULL DEFAULT 0,
    breaker_probes       integer          NOT NULL DEFAULT 0,
    autopause_failures   integer          NOT NULL DEFAULT 0,
    weight               integer          NOT NULL DEFAULT 1,
    ramp                 jsonb            NOT NULL DEFAULT '[]',
    updated_at           timestamptz      NOT NULL DEFAULT now(),
    updated_by           text             NOT NULL DEFAULT '',
    PRIMARY KEY (pattern, queue),
    CONSTRAINT keel_flow_limit_values CHECK (rate >= 0 AND burst >= 0 AND max_running >= 0
        AND breaker_failures >= 0 AND breaker_ratio BETWEEN 0 AND 1 AND breaker_window_ms >= 0
        AND breaker_min_calls >= 0 AND breaker_cooldown_ms >= 0 AND breaker_probes >= 0
        AND autopause_failures >= 0 AND weight BETWEEN 1 AND 1000)
);

CREATE TABLE keel_flow_key (
    key                   text             PRIMARY KEY,
    tokens                double precision NOT NULL DEFAULT 0,
    tokens_at             timestamptz,
    paused_at             timestamptz,
    paused_by             text             NOT NULL DEFAULT '',
    pause_reason          text             NOT NULL DEFAULT '',
    pause_context         jsonb            NOT NULL DEFAULT '{}',
    breaker_state         text             NOT NULL DEFAULT 'closed',
    breaker_opened_at     timestamptz,
    breaker_probes_left   integer          NOT NULL DEFAULT 0,
    consecutive_failures  integer          NOT NULL DEFAULT 0,
    window_start          timestamptz,
    window_calls          integer          NOT NULL DEFAULT 0,
    window_failures       integer          NOT NULL DEFAULT 0,
    ramp_started_at       timestamptz,
    last_error            text             NOT NULL DEFAULT '',
    last_failure_class    text             NOT NULL DEFAULT '',
    last_failure_at       timestamptz,
    last_success_at       timestamptz,
    updated_at            timestamptz      NOT NULL DEFAULT now(),
    CONSTRAINT keel_flow_key_breaker_check CHECK (breaker_state IN ('closed', 'open', 'half_open'))
);
-- Claims exclude gated keys with one probe of this small index.
CREATE INDEX keel_flow_key_gate_idx ON keel_flow_key (key) WHERE paused_at IS NOT NULL OR breaker_state = 'open';
