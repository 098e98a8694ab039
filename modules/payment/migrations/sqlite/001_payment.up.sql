-- Payments: the module's own business orders, payment orders with their
-- state history, callback evidence, refunds, the double-entry ledger and
-- the ingress's security audit. Money is integer minor units with an ISO
-- 4217 currency everywhere.

CREATE TABLE pay_order (
    id           TEXT PRIMARY KEY,
    amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
    currency     TEXT NOT NULL,
    state        TEXT NOT NULL,
    payment_no   TEXT,
    paid_event   TEXT,
    created_at   INTEGER NOT NULL,
    paid_at      INTEGER
);

CREATE TABLE pay_payment (
    payment_no      TEXT PRIMARY KEY,
    order_id        TEXT NOT NULL REFERENCES pay_order (id),
    channel         TEXT NOT NULL,
    merchant_id     TEXT NOT NULL,
    app_id          TEXT NOT NULL,
    amount_minor    BIGINT NOT NULL CHECK (amount_minor > 0),
    currency        TEXT NOT NULL,
    state           TEXT NOT NULL,
    -- unique: one channel transaction pays one payment order, once
    transaction_id  TEXT UNIQUE,
    -- refunds not proven failed; the refund's conditional update keeps
    -- it within the paid amount
    refund_reserved BIGINT NOT NULL DEFAULT 0 CHECK (refund_reserved >= 0 AND refund_reserved <= amount_minor),
    refunded_minor  BIGINT NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0 AND refunded_minor <= refund_reserved),
    refund_count    INTEGER NOT NULL DEFAULT 0,
    version         BIGINT NOT NULL DEFAULT 1,
    source          TEXT NOT NULL DEFAULT '',
    expires_at      INTEGER NOT NULL,
    query_after     INTEGER NOT NULL,
    queries         INTEGER NOT NULL DEFAULT 0,
    paid_at         INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX pay_payment_due ON pay_payment (state, query_after);
CREATE INDEX pay_payment_order ON pay_payment (order_id);

CREATE TABLE pay_payment_history (
    payment_no TEXT NOT NULL REFERENCES pay_payment (payment_no),
    version    BIGINT NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    reason     TEXT NOT NULL,
    actor      TEXT NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (payment_no, version)
);

CREATE TABLE pay_refund (
    refund_no        TEXT PRIMARY KEY,
    payment_no       TEXT NOT NULL REFERENCES pay_payment (payment_no),
    -- the caller's request id: the same request always finds this refund
    request_id       TEXT NOT NULL,
    amount_minor     BIGINT NOT NULL CHECK (amount_minor > 0),
    currency         TEXT NOT NULL,
    state            TEXT NOT NULL,
    reason           TEXT NOT NULL,
    channel_refund_id TEXT NOT NULL DEFAULT '',
    calls            INTEGER NOT NULL DEFAULT 0,
    queries          INTEGER NOT NULL DEFAULT 0,
    version          BIGINT NOT NULL DEFAULT 1,
    unknown_since    INTEGER,
    last_error       TEXT NOT NULL DEFAULT '',
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (payment_no, request_id)
);
CREATE INDEX pay_refund_state ON pay_refund (state, updated_at);

CREATE TABLE pay_refund_history (
    refund_no  TEXT NOT NULL REFERENCES pay_refund (refund_no),
    version    BIGINT NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    reason     TEXT NOT NULL,
    actor      TEXT NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (refund_no, version)
);

-- Every verified callback (and query answer) with its desensitised body
-- and the SHA-256 of the raw body: the evidence of each state change.
CREATE TABLE pay_callback (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    channel        TEXT NOT NULL,
    event          TEXT NOT NULL,
    notify_id      TEXT NOT NULL,
    payment_no     TEXT NOT NULL,
    refund_no      TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    amount_minor   BIGINT NOT NULL,
    currency       TEXT NOT NULL,
    outcome        TEXT NOT NULL,
    detail         TEXT NOT NULL,
    digest         TEXT NOT NULL,
    body           TEXT NOT NULL,
    received_at    INTEGER NOT NULL
);
CREATE INDEX pay_callback_payment ON pay_callback (payment_no, id);
CREATE INDEX pay_callback_outcome ON pay_callback (outcome, id);

-- Callbacks refused before any business change: bad signature, skew,
-- unknown merchant, oversized or malformed bodies.
CREATE TABLE pay_security_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    detail      TEXT NOT NULL,
    digest      TEXT NOT NULL,
    body        TEXT NOT NULL,
    remote      TEXT NOT NULL,
    received_at INTEGER NOT NULL
);

-- Accounts per currency; the balance is kept in the account's normal
-- direction (debit for assets and expenses, credit for liabilities) and
-- may go below zero only where the account's type allows it.
CREATE TABLE pay_account (
    code           TEXT NOT NULL,
    currency       TEXT NOT NULL,
    kind           TEXT NOT NULL,
    allow_negative INTEGER NOT NULL,
    balance_minor  BIGINT NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (code, currency),
    CHECK (allow_negative = 1 OR balance_minor >= 0)
);

-- Append-only journal: one entry per (subject, action); a correction is a
-- new entry that reverses another.
CREATE TABLE pay_journal (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_key    TEXT NOT NULL UNIQUE,
    subject      TEXT NOT NULL,
    action       TEXT NOT NULL,
    payment_no   TEXT NOT NULL,
    refund_no    TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
    currency     TEXT NOT NULL,
    reverses     BIGINT,
    posted_at    INTEGER NOT NULL
);
CREATE INDEX pay_journal_payment ON pay_journal (payment_no);

CREATE TABLE pay_journal_line (
    journal_id   BIGINT NOT NULL REFERENCES pay_journal (id),
    line         INTEGER NOT NULL,
    account      TEXT NOT NULL,
    side         TEXT NOT NULL CHECK (side IN ('D', 'C')),
    amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
    currency     TEXT NOT NULL,
    PRIMARY KEY (journal_id, line)
);

-- A channel bill as fetched, one row per line, kept for the reconciler
-- and as evidence.
CREATE TABLE pay_bill_line (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    channel        TEXT NOT NULL,
    day            TEXT NOT NULL,
    event          TEXT NOT NULL,
    merchant_id    TEXT NOT NULL,
    payment_no     TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    refund_no      TEXT NOT NULL,
    refund_id      TEXT NOT NULL,
    amount_minor   BIGINT NOT NULL,
    fee_minor      BIGINT NOT NULL,
    currency       TEXT NOT NULL,
    state          TEXT NOT NULL,
    at             INTEGER NOT NULL,
    fetched_at     INTEGER NOT NULL
);
CREATE INDEX pay_bill_line_day ON pay_bill_line (channel, day);

-- Compensations executed from reconciliation: one per action id.
CREATE TABLE pay_compensation (
    action_id    TEXT PRIMARY KEY,
    discrepancy  BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    subject      TEXT NOT NULL,
    amount_minor BIGINT NOT NULL,
    currency     TEXT NOT NULL,
    detail       TEXT NOT NULL,
    executed_by  TEXT NOT NULL,
    executed_at  INTEGER NOT NULL
);
