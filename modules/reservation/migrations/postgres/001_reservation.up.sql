-- Reservation line, version 1 (PostgreSQL): no-show auto-release.
--
-- Times are timestamptz (stored UTC); the business time zone is a setting
-- and only matters for time bands and display. A slot's held count equals
-- the reservations holding it (pending_payment, paid, checked_in, restored);
-- every statement that moves a reservation in or out of those states changes
-- held in the same transaction. History rows are never deleted.

CREATE TABLE rsv_category (
    id               text        PRIMARY KEY CHECK (id ~ '^[a-z0-9_-]{1,40}$'),
    name_zh          text        NOT NULL CHECK (char_length(name_zh) BETWEEN 1 AND 100),
    name_en          text        NOT NULL CHECK (char_length(name_en) BETWEEN 1 AND 100),
    grace_minutes    integer     NOT NULL DEFAULT 15 CHECK (grace_minutes BETWEEN 0 AND 1440),
    bands            text        NOT NULL DEFAULT '',
    reminder_minutes integer     NOT NULL DEFAULT 15 CHECK (reminder_minutes BETWEEN 0 AND 1440),
    appeal_minutes   integer     NOT NULL DEFAULT 30 CHECK (appeal_minutes BETWEEN 0 AND 10080),
    hold_minutes     integer     NOT NULL DEFAULT 10 CHECK (hold_minutes BETWEEN 1 AND 1440),
    release_mode     text        NOT NULL DEFAULT 'on' CHECK (release_mode IN ('off', 'dry_run', 'on')),
    version          bigint      NOT NULL DEFAULT 1,
    updated_at       timestamptz NOT NULL,
    updated_by       text        NOT NULL
);

CREATE TABLE rsv_resource (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    category_id text        NOT NULL REFERENCES rsv_category (id),
    name        text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    location    text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL
);

CREATE TABLE rsv_slot (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource_id bigint      NOT NULL REFERENCES rsv_resource (id),
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz NOT NULL,
    capacity    integer     NOT NULL CHECK (capacity BETWEEN 1 AND 100000),
    held        integer     NOT NULL DEFAULT 0,
    waiting     integer     NOT NULL DEFAULT 0 CHECK (waiting >= 0),
    version     bigint      NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT rsv_slot_time_check CHECK (ends_at > starts_at),
    CONSTRAINT rsv_slot_held_check CHECK (held >= 0 AND held <= capacity),
    CONSTRAINT rsv_slot_start_key UNIQUE (resource_id, starts_at)
) WITH (fillfactor = 80);
-- Room on each page lets the held count change in place (a HOT update:
-- no index entry per release).
CREATE INDEX rsv_slot_starts_idx ON rsv_slot (starts_at, id);

CREATE TABLE rsv_reservation (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    slot_id             bigint      NOT NULL REFERENCES rsv_slot (id),
    resource_id         bigint      NOT NULL,
    category_id         text        NOT NULL,
    user_id             text        NOT NULL CHECK (char_length(user_id) BETWEEN 1 AND 100),
    state               text        NOT NULL CHECK (state IN ('pending_payment', 'paid', 'checked_in',
                            'released', 'cancelled', 'restored', 'expired')),
    starts_at           timestamptz NOT NULL,
    ends_at             timestamptz NOT NULL,
    grace_minutes       integer     NOT NULL DEFAULT 0,
    expected_release_at timestamptz,
    hold_expires_at     timestamptz,
    appeal_until        timestamptz,
    version             bigint      NOT NULL DEFAULT 1,
    retry_count         integer     NOT NULL DEFAULT 0,
    last_error          text        NOT NULL DEFAULT '',
    next_retry_at       timestamptz,
    dead_at             timestamptz,
    waitlist_id         bigint,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    paid_at             timestamptz,
    checked_in_at       timestamptz,
    released_at         timestamptz,
    cancelled_at        timestamptz,
    restored_at         timestamptz,
    expired_at          timestamptz,
    CONSTRAINT rsv_reservation_paid_check CHECK (state <> 'paid' OR expected_release_at IS NOT NULL)
);
-- The release scan reads only this index: paid, never failed, per category,
-- in due order.
CREATE INDEX rsv_reservation_due_idx ON rsv_reservation (category_id, expected_release_at, id)
    WHERE state = 'paid' AND retry_count = 0;
-- Compensation reads records that failed and are not dead yet.
CREATE INDEX rsv_reservation_retry_idx ON rsv_reservation (next_retry_at, id)
    WHERE state = 'paid' AND retry_count > 0;
CREATE INDEX rsv_reservation_hold_idx ON rsv_reservation (hold_expires_at, id)
    WHERE state = 'pending_payment';
CREATE INDEX rsv_reservation_slot_idx ON rsv_reservation (slot_id, state);
CREATE INDEX rsv_reservation_user_idx ON rsv_reservation (user_id, id);

-- One row per version of a reservation: every transition increments the
-- version and writes exactly one row.
CREATE TABLE rsv_history (
    reservation_id bigint      NOT NULL,
    version        bigint      NOT NULL,
    from_state     text        NOT NULL,
    to_state       text        NOT NULL,
    actor          text        NOT NULL,
    reason         text        NOT NULL DEFAULT '',
    at             timestamptz NOT NULL,
    PRIMARY KEY (reservation_id, version)
);

CREATE TABLE rsv_waitlist (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    slot_id        bigint      NOT NULL REFERENCES rsv_slot (id),
    user_id        text        NOT NULL CHECK (char_length(user_id) BETWEEN 1 AND 100),
    state          text        NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'offered', 'left')),
    reservation_id bigint,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX rsv_waitlist_slot_idx ON rsv_waitlist (slot_id, id) WHERE state = 'waiting';
CREATE UNIQUE INDEX rsv_waitlist_user_key ON rsv_waitlist (slot_id, user_id) WHERE state = 'waiting';

-- The outbox: notifications (delivered by engine jobs inserted in the same
-- transaction) and availability events (relayed to a publisher).
CREATE TABLE rsv_outbox (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                text        NOT NULL CHECK (kind IN ('reminder', 'release', 'offer', 'offer_lapsed',
                            'restore', 'availability')),
    reservation_id      bigint,
    reservation_version bigint      NOT NULL DEFAULT 0,
    slot_id             bigint,
    user_id             text        NOT NULL DEFAULT '',
    payload             jsonb       NOT NULL DEFAULT '{}',
    state               text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'skipped', 'failed')),
    deliver_at          timestamptz NOT NULL,
    attempts            integer     NOT NULL DEFAULT 0,
    last_error          text        NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL,
    queued_at           timestamptz,
    sent_at             timestamptz
);
CREATE INDEX rsv_outbox_events_idx ON rsv_outbox (id) WHERE state = 'pending' AND kind = 'availability';
-- Notifications written by scans wait here for the relay to queue their
-- delivery jobs.
CREATE INDEX rsv_outbox_dispatch_idx ON rsv_outbox (id)
    WHERE queued_at IS NULL AND state = 'pending' AND kind <> 'availability';
CREATE INDEX rsv_outbox_reservation_idx ON rsv_outbox (reservation_id, id);
CREATE INDEX rsv_outbox_done_idx ON rsv_outbox (created_at) WHERE state IN ('sent', 'skipped');

CREATE TABLE rsv_noshow (
    reservation_id bigint      PRIMARY KEY,
    user_id        text        NOT NULL,
    category_id    text        NOT NULL,
    at             timestamptz NOT NULL,
    voided_at      timestamptz,
    voided_by      text        NOT NULL DEFAULT '',
    void_reason    text        NOT NULL DEFAULT ''
);
CREATE INDEX rsv_noshow_user_idx ON rsv_noshow (user_id, at);

CREATE TABLE rsv_policy (
    id            integer     PRIMARY KEY CHECK (id = 1),
    enabled       boolean     NOT NULL DEFAULT false,
    threshold     integer     NOT NULL DEFAULT 3 CHECK (threshold BETWEEN 1 AND 1000),
    window_days   integer     NOT NULL DEFAULT 365 CHECK (window_days BETWEEN 1 AND 3650),
    restrict_days integer     NOT NULL DEFAULT 30 CHECK (restrict_days BETWEEN 1 AND 3650),
    version       bigint      NOT NULL DEFAULT 1,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    updated_by    text        NOT NULL DEFAULT 'system'
);
INSERT INTO rsv_policy (id) VALUES (1);

CREATE TABLE rsv_restriction (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     text        NOT NULL,
    since       timestamptz NOT NULL,
    until       timestamptz NOT NULL,
    noshows     integer     NOT NULL,
    lifted_at   timestamptz,
    lifted_by   text        NOT NULL DEFAULT '',
    lift_reason text        NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX rsv_restriction_active_key ON rsv_restriction (user_id) WHERE lifted_at IS NULL;

CREATE TABLE rsv_run (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind           text        NOT NULL CHECK (kind IN ('scan', 'compensation')),
    instance       text        NOT NULL,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz NOT NULL,
    scanned        integer     NOT NULL DEFAULT 0,
    released       integer     NOT NULL DEFAULT 0,
    failed         integer     NOT NULL DEFAULT 0,
    restore_ok     integer     NOT NULL DEFAULT 0,
    restore_failed integer     NOT NULL DEFAULT 0,
    promoted       integer     NOT NULL DEFAULT 0,
    holds_expired  integer     NOT NULL DEFAULT 0,
    dry_run        integer     NOT NULL DEFAULT 0,
    dead_lettered  integer     NOT NULL DEFAULT 0,
    first_id       bigint      NOT NULL DEFAULT 0,
    last_id        bigint      NOT NULL DEFAULT 0,
    errors         text        NOT NULL DEFAULT ''
);
CREATE INDEX rsv_run_kind_idx ON rsv_run (kind, id);
