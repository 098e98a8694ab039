-- Reconciliation line, version 1 (PostgreSQL): runs, discrepancies and the
-- general four-eyes approval requests.
--
-- A discrepancy is keyed by (reconciler, class, key): a rerun finds the same
-- row again instead of adding one. Evidence is the JSON snapshot of each
-- source, kept as text (it is shown, never queried). Amounts are integer
-- minor units with their ISO 4217 currency.

CREATE TABLE keel_recon_run (
    id            BIGSERIAL   PRIMARY KEY,
    reconciler    TEXT        NOT NULL,
    rule_version  TEXT        NOT NULL,
    cutoff        TIMESTAMPTZ NOT NULL,
    trigger       TEXT        NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    requested_by  TEXT        NOT NULL,
    state         TEXT        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'succeeded', 'failed')),
    started_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ,
    compared      BIGINT      NOT NULL DEFAULT 0,
    found         BIGINT      NOT NULL DEFAULT 0,
    totals        TEXT        NOT NULL DEFAULT '{}',
    digest        TEXT        NOT NULL DEFAULT '',
    applied       BOOLEAN     NOT NULL DEFAULT false,
    opened        BIGINT      NOT NULL DEFAULT 0,
    healed        BIGINT      NOT NULL DEFAULT 0,
    verified      BIGINT      NOT NULL DEFAULT 0,
    resolved      BIGINT      NOT NULL DEFAULT 0,
    reopened      BIGINT      NOT NULL DEFAULT 0,
    error         TEXT        NOT NULL DEFAULT '',
    instance      TEXT        NOT NULL DEFAULT ''
);

CREATE INDEX keel_recon_run_reconciler_idx ON keel_recon_run (reconciler, id DESC);

CREATE TABLE keel_recon_discrepancy (
    id               BIGSERIAL   PRIMARY KEY,
    reconciler       TEXT        NOT NULL,
    class            TEXT        NOT NULL CHECK (class IN ('missing_ours', 'missing_theirs', 'duplicate',
                                                           'amount_mismatch', 'status_mismatch', 'other')),
    key              TEXT        NOT NULL,
    state            TEXT        NOT NULL CHECK (state IN ('open', 'auto_healed', 'awaiting_approval', 'approved',
                                                           'executed', 'verified', 'rejected', 'resolved')),
    generation       INTEGER     NOT NULL DEFAULT 1,
    evidence         TEXT        NOT NULL,
    suggested_action TEXT        NOT NULL,
    impact           BIGINT      NOT NULL,
    currency         TEXT        NOT NULL,
    safe_auto_heal   BOOLEAN     NOT NULL,
    needs_approval   BOOLEAN     NOT NULL,
    first_run_id     BIGINT      NOT NULL,
    last_run_id      BIGINT      NOT NULL,
    verified_run_id  BIGINT,
    approval_id      BIGINT,
    action_id        TEXT        NOT NULL DEFAULT '',
    executed_by      TEXT        NOT NULL DEFAULT '',
    executed_at      TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (reconciler, class, key)
);

CREATE INDEX keel_recon_discrepancy_state_idx ON keel_recon_discrepancy (state, id DESC);

CREATE TABLE keel_approval (
    id              BIGSERIAL   PRIMARY KEY,
    kind            TEXT        NOT NULL,
    target          TEXT        NOT NULL,
    action_id       TEXT        NOT NULL,
    summary         TEXT        NOT NULL DEFAULT '',
    amount          BIGINT      NOT NULL DEFAULT 0,
    currency        TEXT        NOT NULL DEFAULT '',
    state           TEXT        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected',
                                                                           'executed', 'cancelled')),
    requested_by    TEXT        NOT NULL,
    request_reason  TEXT        NOT NULL,
    requested_at    TIMESTAMPTZ NOT NULL,
    decided_by      TEXT        NOT NULL DEFAULT '',
    decision_reason TEXT        NOT NULL DEFAULT '',
    decided_at      TIMESTAMPTZ,
    executed_by     TEXT        NOT NULL DEFAULT '',
    executed_at     TIMESTAMPTZ,
    -- Four-eyes: whoever decides is not whoever asked (also enforced in
    -- each decision's conditional UPDATE, which explains a refusal).
    CHECK (decided_by = '' OR decided_by <> requested_by),
    UNIQUE (kind, action_id)
);

CREATE INDEX keel_approval_state_idx ON keel_approval (state, id DESC);
