-- Engine line, version 1: jobs, queues, leadership, audit, migrations.
-- Runs with search_path set to the configured schema.

CREATE TABLE IF NOT EXISTS keel_migration (
    line       text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (line, version)
);

CREATE TABLE keel_job (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind              text        NOT NULL,
    queue             text        NOT NULL DEFAULT 'default',
    args              jsonb       NOT NULL DEFAULT '{}',
    metadata          jsonb       NOT NULL DEFAULT '{}',
    state             text        NOT NULL DEFAULT 'available',
    priority          smallint    NOT NULL DEFAULT 2,
    run_at            timestamptz NOT NULL DEFAULT now(),
    attempt           integer     NOT NULL DEFAULT 0,
    max_attempts      integer     NOT NULL DEFAULT 25,
    fence             bigint      NOT NULL DEFAULT 0,
    lease_owner       text,
    lease_expires_at  timestamptz,
    idempotency_key   text,
    flow_key          text,
    batch_id          bigint,
    subject           text,
    wait_reason       text,
    wait_deadline     timestamptz,
    needs_check       boolean     NOT NULL DEFAULT false,
    cancel_requested  boolean     NOT NULL DEFAULT false,
    result            jsonb,
    errors            jsonb       NOT NULL DEFAULT '[]',
    created_at        timestamptz NOT NULL DEFAULT now(),
    attempted_at      timestamptz,
    finalized_at      timestamptz,
    CONSTRAINT keel_job_state_check CHECK (state IN ('scheduled','available','running','retryable',
        'waiting','unknown','manual','completed','failed','cancelled','skipped')),
    CONSTRAINT keel_job_priority_check CHECK (priority BETWEEN 1 AND 4),
    CONSTRAINT keel_job_attempts_check CHECK (max_attempts > 0 AND attempt >= 0),
    CONSTRAINT keel_job_kind_check CHECK (char_length(kind) BETWEEN 1 AND 128),
    CONSTRAINT keel_job_queue_check CHECK (char_length(queue) BETWEEN 1 AND 128)
);

-- Claiming reads only this index: finished rows are not in it, so a table
-- with millions of completed jobs claims as fast as an empty one.
CREATE INDEX keel_job_claim_idx ON keel_job (queue, priority, id) WHERE state = 'available';
-- Promotion of due scheduled/retryable/unknown jobs and of expired waits.
CREATE INDEX keel_job_due_idx ON keel_job (run_at) WHERE state IN ('scheduled','retryable','unknown');
CREATE INDEX keel_job_wait_idx ON keel_job (wait_deadline) WHERE state = 'waiting';
CREATE INDEX keel_job_wait_key_idx ON keel_job (flow_key, wait_reason) WHERE state = 'waiting';
-- Rescue of expired leases.
CREATE INDEX keel_job_lease_idx ON keel_job (lease_expires_at) WHERE state = 'running';
-- Retention prunes final rows by age.
CREATE INDEX keel_job_finalized_idx ON keel_job (finalized_at) WHERE finalized_at IS NOT NULL;
CREATE UNIQUE INDEX keel_job_idempotency_idx ON keel_job (kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX keel_job_state_idx ON keel_job (state, queue);
CREATE INDEX keel_job_kind_idx ON keel_job (kind, id);
CREATE INDEX keel_job_flow_key_idx ON keel_job (flow_key, id) WHERE flow_key IS NOT NULL;
CREATE UNIQUE INDEX keel_job_batch_subject_idx ON keel_job (batch_id, subject) WHERE batch_id IS NOT NULL;

CREATE TABLE keel_queue (
    name       text        PRIMARY KEY,
    paused_at  timestamptz,
    paused_by  text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE keel_leader (
    name       text        PRIMARY KEY,
    leader_id  text        NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE keel_audit (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL,
    action  text        NOT NULL,
    target  text        NOT NULL DEFAULT '',
    reason  text        NOT NULL DEFAULT '',
    context jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX keel_audit_action_idx ON keel_audit (action, id);
CREATE INDEX keel_audit_target_idx ON keel_audit (target, id);
CREATE INDEX keel_audit_at_idx ON keel_audit (at);
