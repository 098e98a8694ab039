-- Reservation line, version 1 (SQLite): no-show auto-release.
--
-- Times are INTEGER unix microseconds (UTC), like the engine's tables; the
-- business time zone is a setting. A slot's held count equals the
-- reservations holding it (pending_payment, paid, checked_in, restored).
-- History rows are never deleted.

CREATE TABLE rsv_category (
    id               TEXT    PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 40 AND id NOT GLOB '*[^a-z0-9_-]*'),
    name_zh          TEXT    NOT NULL CHECK (length(name_zh) BETWEEN 1 AND 100),
    name_en          TEXT    NOT NULL CHECK (length(name_en) BETWEEN 1 AND 100),
    grace_minutes    INTEGER NOT NULL DEFAULT 15 CHECK (grace_minutes BETWEEN 0 AND 1440),
    bands            TEXT    NOT NULL DEFAULT '',
    reminder_minutes INTEGER NOT NULL DEFAULT 15 CHECK (reminder_minutes BETWEEN 0 AND 1440),
    appeal_minutes   INTEGER NOT NULL DEFAULT 30 CHECK (appeal_minutes BETWEEN 0 AND 10080),
    hold_minutes     INTEGER NOT NULL DEFAULT 10 CHECK (hold_minutes BETWEEN 1 AND 1440),
    release_mode     TEXT    NOT NULL DEFAULT 'on' CHECK (release_mode IN ('off', 'dry_run', 'on')),
    version          INTEGER NOT NULL DEFAULT 1,
    updated_at       INTEGER NOT NULL,
    updated_by       TEXT    NOT NULL
);

CREATE TABLE rsv_resource (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    category_id TEXT    NOT NULL REFERENCES rsv_category (id),
    name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    location    TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
);

CREATE TABLE rsv_slot (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id INTEGER NOT NULL REFERENCES rsv_resource (id),
    starts_at   INTEGER NOT NULL,
    ends_at     INTEGER NOT NULL,
    capacity    INTEGER NOT NULL CHECK (capacity BETWEEN 1 AND 100000),
    held        INTEGER NOT NULL DEFAULT 0,
    waiting     INTEGER NOT NULL DEFAULT 0 CHECK (waiting >= 0),
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    CHECK (ends_at > starts_at),
    CHECK (held >= 0 AND held <= capacity),
    UNIQUE (resource_id, starts_at)
);
CREATE INDEX rsv_slot_starts_idx ON rsv_slot (starts_at, id);

CREATE TABLE rsv_reservation (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    slot_id             INTEGER NOT NULL REFERENCES rsv_slot (id),
    resource_id         INTEGER NOT NULL,
    category_id         TEXT    NOT NULL,
    user_id             TEXT    NOT NULL CHECK (length(user_id) BETWEEN 1 AND 100),
    state               TEXT    NOT NULL CHECK (state IN ('pending_payment', 'paid', 'checked_in',
                            'released', 'cancelled', 'restored', 'expired')),
    starts_at           INTEGER NOT NULL,
    ends_at             INTEGER NOT NULL,
    grace_minutes       INTEGER NOT NULL DEFAULT 0,
    expected_release_at INTEGER,
    hold_expires_at     INTEGER,
    appeal_until        INTEGER,
    version             INTEGER NOT NULL DEFAULT 1,
    retry_count         INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT    NOT NULL DEFAULT '',
    next_retry_at       INTEGER,
    dead_at             INTEGER,
    waitlist_id         INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    paid_at             INTEGER,
    checked_in_at       INTEGER,
    released_at         INTEGER,
    cancelled_at        INTEGER,
    restored_at         INTEGER,
    expired_at          INTEGER,
    CHECK (state <> 'paid' OR expected_release_at IS NOT NULL)
);
CREATE INDEX rsv_reservation_due_idx ON rsv_reservation (category_id, expected_release_at, id)
    WHERE state = 'paid' AND retry_count = 0;
CREATE INDEX rsv_reservation_retry_idx ON rsv_reservation (next_retry_at, id)
    WHERE state = 'paid' AND retry_count > 0;
CREATE INDEX rsv_reservation_hold_idx ON rsv_reservation (hold_expires_at, id)
    WHERE state = 'pending_payment';
CREATE INDEX rsv_reservation_slot_idx ON rsv_reservation (slot_id, state);
CREATE INDEX rsv_reservation_user_idx ON rsv_reservation (user_id, id);

-- One row per version of a reservation: every transition increments the
-- version and writes exactly one row.
CREATE TABLE rsv_history (
    reservation_id INTEGER NOT NULL,
    version        INTEGER NOT NULL,
    from_state     TEXT    NOT NULL,
    to_state       TEXT    NOT NULL,
    actor          TEXT    NOT NULL,
    reason         TEXT    NOT NULL DEFAULT '',
    at             INTEGER NOT NULL,
    PRIMARY KEY (reservation_id, version)
) WITHOUT ROWID;

CREATE TABLE rsv_waitlist (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    slot_id        INTEGER NOT NULL REFERENCES rsv_slot (id),
    user_id        TEXT    NOT NULL CHECK (length(user_id) BETWEEN 1 AND 100),
    state          TEXT    NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'offered', 'left')),
    reservation_id INTEGER,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX rsv_waitlist_slot_idx ON rsv_waitlist (slot_id, id) WHERE state = 'waiting';
CREATE UNIQUE INDEX rsv_waitlist_user_key ON rsv_waitlist (slot_id, user_id) WHERE state = 'waiting';

CREATE TABLE rsv_outbox (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                TEXT    NOT NULL CHECK (kind IN ('reminder', 'release', 'offer', 'offer_lapsed',
                            'restore', 'availability')),
    reservation_id      INTEGER,
    reservation_version INTEGER NOT NULL DEFAULT 0,
    slot_id             INTEGER,
    user_id             TEXT    NOT NULL DEFAULT '',
    payload             TEXT    NOT NULL DEFAULT '{}',
    state               TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'skipped', 'failed')),
    deliver_at          INTEGER NOT NULL,
    attempts            INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT    NOT NULL DEFAULT '',
    created_at          INTEGER NOT NULL,
    queued_at           INTEGER,
    sent_at             INTEGER
);
CREATE INDEX rsv_outbox_events_idx ON rsv_outbox (id) WHERE state = 'pending' AND kind = 'availability';
-- Notifications written by scans wait here for the relay to queue their
-- delivery jobs.
CREATE INDEX rsv_outbox_dispatch_idx ON rsv_outbox (id)
    WHERE queued_at IS NULL AND state = 'pending' AND kind <> 'availability';
CREATE INDEX rsv_outbox_reservation_idx ON rsv_outbox (reservation_id, id);
CREATE INDEX rsv_outbox_done_idx ON rsv_outbox (created_at) WHERE state IN ('sent', 'skipped');

CREATE TABLE rsv_noshow (
    reservation_id INTEGER PRIMARY KEY,
    user_id        TEXT    NOT NULL,
    category_id    TEXT    NOT NULL,
    at             INTEGER NOT NULL,
    voided_at      INTEGER,
    voided_by      TEXT    NOT NULL DEFAULT '',
    void_reason    TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX rsv_noshow_user_idx ON rsv_noshow (user_id, at);

CREATE TABLE rsv_policy (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    enabled       INTEGER NOT NULL DEFAULT 0,
    threshold     INTEGER NOT NULL DEFAULT 3 CHECK (threshold BETWEEN 1 AND 1000),
    window_days   INTEGER NOT NULL DEFAULT 365 CHECK (window_days BETWEEN 1 AND 3650),
    restrict_days INTEGER NOT NULL DEFAULT 30 CHECK (restrict_days BETWEEN 1 AND 3650),
    version       INTEGER NOT NULL DEFAULT 1,
    updated_at    INTEGER NOT NULL DEFAULT 0,
    updated_by    TEXT    NOT NULL DEFAULT 'system'
);
INSERT INTO rsv_policy (id) VALUES (1);

CREATE TABLE rsv_restriction (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     TEXT    NOT NULL,
    since       INTEGER NOT NULL,
    until       INTEGER NOT NULL,
    noshows     INTEGER NOT NULL,
    lifted_at   INTEGER,
    lifted_by   TEXT    NOT NULL DEFAULT '',
    lift_reason TEXT    NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX rsv_restriction_active_key ON rsv_restriction (user_id) WHERE lifted_at IS NULL;

CREATE TABLE rsv_run (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    kind           TEXT    NOT NULL CHECK (kind IN ('scan', 'compensation')),
    instance       TEXT    NOT NULL,
    started_at     INTEGER NOT NULL,
    finished_at    INTEGER NOT NULL,
    scanned        INTEGER NOT NULL DEFAULT 0,
    released       INTEGER NOT NULL DEFAULT 0,
    failed         INTEGER NOT NULL DEFAULT 0,
    restore_ok     INTEGER NOT NULL DEFAULT 0,
    restore_failed INTEGER NOT NULL DEFAULT 0,
    promoted       INTEGER NOT NULL DEFAULT 0,
    holds_expired  INTEGER NOT NULL DEFAULT 0,
    dry_run        INTEGER NOT NULL DEFAULT 0,
    dead_lettered  INTEGER NOT NULL DEFAULT 0,
    first_id       INTEGER NOT NULL DEFAULT 0,
    last_id        INTEGER NOT NULL DEFAULT 0,
    errors         TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX rsv_run_kind_idx ON rsv_run (kind, id);
