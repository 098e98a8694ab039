-- Warehouse inventory: balances per (warehouse, SKU), reservations with
-- their history, the unique stock ledger, per-action idempotency records,
-- conflict tickets, adjustments and the consumers' own tables.

CREATE TABLE inv_warehouse (
    id         TEXT PRIMARY KEY,
    name_zh    TEXT NOT NULL,
    name_en    TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE inv_sku (
    id               TEXT PRIMARY KEY,
    name_zh          TEXT NOT NULL,
    name_en          TEXT NOT NULL,
    unit_value_minor BIGINT NOT NULL CHECK (unit_value_minor >= 0),
    currency         TEXT NOT NULL,
    created_at       INTEGER NOT NULL
);

CREATE TABLE inv_stock (
    warehouse_id TEXT NOT NULL REFERENCES inv_warehouse (id),
    sku_id       TEXT NOT NULL REFERENCES inv_sku (id),
    on_hand      BIGINT NOT NULL CHECK (on_hand >= 0),
    available    BIGINT NOT NULL CHECK (available >= 0),
    reserved     BIGINT NOT NULL CHECK (reserved >= 0),
    sold         BIGINT NOT NULL CHECK (sold >= 0),
    returned     BIGINT NOT NULL CHECK (returned >= 0),
    version      BIGINT NOT NULL,
    -- how many requests the last coalesced statement granted (read back
    -- by its RETURNING: the statement is the only place that knows)
    last_grant   BIGINT NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (warehouse_id, sku_id)
);

CREATE TABLE inv_reservation (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    order_line    TEXT NOT NULL UNIQUE,
    warehouse_id  TEXT NOT NULL,
    sku_id        TEXT NOT NULL,
    qty           BIGINT NOT NULL CHECK (qty > 0),
    state         TEXT NOT NULL,
    version       BIGINT NOT NULL,
    stock_version BIGINT NOT NULL,
    expires_at    INTEGER NOT NULL,
    check_after   INTEGER NOT NULL,
    checks        INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX inv_reservation_due ON inv_reservation (state, check_after);
CREATE INDEX inv_reservation_stock ON inv_reservation (warehouse_id, sku_id);

CREATE TABLE inv_reservation_history (
    reservation_id BIGINT NOT NULL REFERENCES inv_reservation (id),
    version        BIGINT NOT NULL,
    from_state     TEXT NOT NULL,
    to_state       TEXT NOT NULL,
    action         TEXT NOT NULL,
    ledger_id      BIGINT,
    detail         TEXT NOT NULL,
    actor          TEXT NOT NULL,
    at             INTEGER NOT NULL,
    PRIMARY KEY (reservation_id, version)
);

-- Every movement: one row, written with the balance change and the outbox
-- event (whose id is this row's id). intent is the movement's stable
-- business identity, so a movement can never be booked twice.
CREATE TABLE inv_ledger (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    intent         TEXT NOT NULL UNIQUE,
    warehouse_id   TEXT NOT NULL,
    sku_id         TEXT NOT NULL,
    movement       TEXT NOT NULL,
    qty            BIGINT NOT NULL,
    d_on_hand      BIGINT NOT NULL,
    d_available    BIGINT NOT NULL,
    d_reserved     BIGINT NOT NULL,
    d_sold         BIGINT NOT NULL,
    d_returned     BIGINT NOT NULL,
    stock_version  BIGINT NOT NULL,
    reservation_id BIGINT,
    reason         TEXT NOT NULL,
    actor          TEXT NOT NULL,
    at             INTEGER NOT NULL,
    UNIQUE (warehouse_id, sku_id, stock_version)
);

-- One row per idempotency key: its parameters' digest and first result.
CREATE TABLE inv_action (
    action_key TEXT PRIMARY KEY,
    params     TEXT NOT NULL,
    result     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE inv_conflict (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    intent         TEXT NOT NULL UNIQUE,
    reservation_id BIGINT,
    warehouse_id   TEXT NOT NULL,
    sku_id         TEXT NOT NULL,
    kind           TEXT NOT NULL,
    state          TEXT NOT NULL,
    evidence       TEXT NOT NULL,
    opened_at      INTEGER NOT NULL,
    resolved_at    INTEGER,
    resolution     TEXT NOT NULL DEFAULT '',
    adjustment_id  BIGINT
);
CREATE INDEX inv_conflict_state ON inv_conflict (state, id);

CREATE TABLE inv_adjustment (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    intent       TEXT NOT NULL UNIQUE,
    warehouse_id TEXT NOT NULL,
    sku_id       TEXT NOT NULL,
    delta        BIGINT NOT NULL,
    value_minor  BIGINT NOT NULL,
    currency     TEXT NOT NULL,
    reason       TEXT NOT NULL,
    state        TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    approved_by  TEXT NOT NULL DEFAULT '',
    conflict_id  BIGINT,
    ledger_id    BIGINT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

-- Consumers' tables: each is written in the inbox transaction.
CREATE TABLE inv_pick_task (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    reservation_id BIGINT NOT NULL UNIQUE,
    ledger_id      BIGINT NOT NULL,
    warehouse_id   TEXT NOT NULL,
    sku_id         TEXT NOT NULL,
    qty            BIGINT NOT NULL,
    created_at     INTEGER NOT NULL
);

CREATE TABLE inv_search (
    warehouse_id TEXT NOT NULL,
    sku_id       TEXT NOT NULL,
    version      BIGINT NOT NULL,
    available    BIGINT NOT NULL,
    on_hand      BIGINT NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (warehouse_id, sku_id)
);

CREATE TABLE inv_search_stale (
    warehouse_id TEXT NOT NULL,
    sku_id       TEXT NOT NULL,
    version      BIGINT NOT NULL,
    current      BIGINT NOT NULL,
    at           INTEGER NOT NULL,
    PRIMARY KEY (warehouse_id, sku_id, version)
);

-- A version the projection skipped: refetched from the ledger.
CREATE TABLE inv_search_gap (
    warehouse_id TEXT NOT NULL,
    sku_id       TEXT NOT NULL,
    version      BIGINT NOT NULL,
    ledger_id    BIGINT,
    at           INTEGER NOT NULL,
    PRIMARY KEY (warehouse_id, sku_id, version)
);

CREATE TABLE inv_stats (
    sku_id   TEXT NOT NULL,
    movement TEXT NOT NULL,
    events   BIGINT NOT NULL,
    qty      BIGINT NOT NULL,
    PRIMARY KEY (sku_id, movement)
);

-- Physical counts (盘点), imported from CSV: the latest per pair is
-- compared with the books by reconciliation.
CREATE TABLE inv_count (
    count_id     TEXT NOT NULL,
    warehouse_id TEXT NOT NULL,
    sku_id       TEXT NOT NULL,
    counted      BIGINT NOT NULL CHECK (counted >= 0),
    counted_at   INTEGER NOT NULL,
    imported_by  TEXT NOT NULL,
    PRIMARY KEY (count_id, warehouse_id, sku_id)
);
