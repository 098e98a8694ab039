-- Reconciliation line, version 1 (SQLite): runs, discrepancies and the
-- general four-eyes approval requests.
--
-- A discrepancy is keyed by (reconciler, class, key): a rerun finds the same
-- row again instead of adding one. Evidence is the JSON snapshot of each
-- source, kept as text (it is shown, never queried). Amounts are integer
-- minor units with their ISO 4217 currency; times are INTEGER unix
-- microseconds (UTC), like the engine's tables.

CREATE TABLE keel_recon_run (
    id            INTEGER     PRIMARY KEY AUTOINCREMENT,
    reconciler    TEXT        NOT NULL,
    rule_version  TEXT        NOT NULL,
    cutoff        INTEGER     NOT NULL,
    trigger       TEXT        NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    requested_by  TEXT        NOT NULL,
    state         TEXT        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'succeeded', 'failed')),
    started_at    INTEGER     NOT NULL,
    finished_at   INTEGER,
    compared      INTEGER      NOT NULL DEFAULT 0,
    found         INTEGER      NOT NULL DEFAULT 0,
    totals        TEXT        NOT NULL DEFAULT '{}',
    digest        TEXT        NOT NULL DEFAULT '',
    applied       INTEGER     NOT NULL DEFAULT 0,
    opened        INTEGER      NOT NULL DEFAULT 0,
    healed        INTEGER      NOT NULL DEFAULT 0,
    verified      INTEGER      NOT NULL DEFAULT 0,
    resolved      INTEGER      NOT NULL DEFAULT 0,
    reopened      INTEGER      NOT NULL DEFAULT 0,
    error         TEXT        NOT NULL DEFAULT '',
    instance      TEXT        NOT NULL DEFAULT ''
);

CREATE INDEX keel_recon_run_reconciler_idx ON keel_recon_run (reconciler, id DESC);

CREATE TABLE keel_recon_discrepancy (
    id               INTEGER     PRIMARY KEY AUTOINCREMENT,
    reconciler       TEXT        NOT NULL,
    class            TEXT        NOT NULL CHECK (class IN ('missing_ours', 'missing_theirs', 'duplicate',
                                                           'amount_mismatch', 'status_mismatch', 'other')),
    key              TEXT        NOT NULL,
    state            TEXT        NOT NULL CHECK (state IN ('open', 'auto_healed', 'awaiting_approval', 'approved',
                                                           'executed', 'verified', 'rejected', 'resolved')),
    generation       INTEGER     NOT NULL DEFAULT 1,
    evidence         TEXT        NOT NULL,
    suggested_action TEXT        NOT NULL,
    impact           INTEGER      NOT NULL,
    currency         TEXT        NOT NULL,
    safe_auto_heal   INTEGER     NOT NULL,
    needs_approval   INTEGER     NOT NULL,
    first_run_id     INTEGER      NOT NULL,
    last_run_id      INTEGER      NOT NULL,
    verified_run_id  INTEGER,
    approval_id      INTEGER,
    action_id        TEXT        NOT NULL DEFAULT '',
    executed_by      TEXT        NOT NULL DEFAULT '',
    executed_at      INTEGER,
    created_at       INTEGER     NOT NULL,
    updated_at       INTEGER     NOT NULL,
    UNIQUE (reconciler, class, key)
);

CREATE INDEX keel_recon_discrepancy_state_idx ON keel_recon_discrepancy (state, id DESC);

CREATE TABLE keel_approval (
    id              INTEGER     PRIMARY KEY AUTOINCREMENT,
    kind            TEXT        NOT NULL,
    target          TEXT        NOT NULL,
    action_id       TEXT        NOT NULL,
    summary         TEXT        NOT NULL DEFAULT '',
    amount          INTEGER      NOT NULL DEFAULT 0,
    currency        TEXT        NOT NULL DEFAULT '',
    state           TEXT        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected',
                                                                           'executed', 'cancelled')),
    requested_by    TEXT        NOT NULL,
    request_reason  TEXT        NOT NULL,
    requested_at    INTEGER     NOT NULL,
    decided_by      TEXT        NOT NULL DEFAULT '',
    decision_reason TEXT        NOT NULL DEFAULT '',
    decided_at      INTEGER,
    executed_by     TEXT        NOT NULL DEFAULT '',
    executed_at     INTEGER,
    -- Four-eyes: whoever decides is not whoever asked (also enforced in
    -- each decision's conditional UPDATE, which explains a refusal).
    CHECK (decided_by = '' OR decided_by <> requested_by),
    UNIQUE (kind, action_id)
);

CREATE INDEX keel_approval_state_idx ON keel_approval (state, id DESC);
