-- The events backbone: outbox, relay leases, archive, the in-database bus,
-- the inbox and what operators act on (quarantine, manual).

-- The partition count is fixed per database: an event's partition is
-- hash(key) mod it, and per-key order rests on a key never moving.
CREATE TABLE keel_events_meta (
    singleton  INTEGER PRIMARY KEY DEFAULT 1 CHECK (singleton = 1),
    partitions integer NOT NULL CHECK (partitions BETWEEN 1 AND 4096)
);

-- The outbox: written by EmitTx in the business transaction.
CREATE TABLE keel_events_outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    topic        text        NOT NULL,
    event_id     text        NOT NULL,
    event_key    text        NOT NULL,
    event_type   text        NOT NULL,
    part         integer     NOT NULL,
    payload      text        NOT NULL,
    headers      text        NOT NULL DEFAULT '{}',
    digest       text        NOT NULL,
    emitted_at   INTEGER NOT NULL,
    published_at INTEGER,
    attempts     integer     NOT NULL DEFAULT 0,
    unknown      integer     NOT NULL DEFAULT 0,
    UNIQUE (topic, event_id)
);
CREATE INDEX keel_events_outbox_pending_idx ON keel_events_outbox (part, seq) WHERE published_at IS NULL;
CREATE INDEX keel_events_outbox_published_idx ON keel_events_outbox (published_at) WHERE published_at IS NOT NULL;

-- Published events past the retention horizon: what reconciliation still
-- reads once the payload is gone.
CREATE TABLE keel_events_archive (
    topic        text        NOT NULL,
    event_id     text        NOT NULL,
    event_key    text        NOT NULL,
    event_type   text        NOT NULL,
    digest       text        NOT NULL,
    part         integer     NOT NULL,
    emitted_at   INTEGER NOT NULL,
    published_at INTEGER NOT NULL,
    attempts     integer     NOT NULL,
    unknown      integer     NOT NULL,
    archived_at  INTEGER NOT NULL,
    PRIMARY KEY (topic, event_id)
);

-- Relay partitions: each held by one relay instance under a lease; the
-- fence grows on every change of owner so a stale relay's marks miss.
CREATE TABLE keel_events_relay_lease (
    part       integer     PRIMARY KEY,
    owner      text        NOT NULL DEFAULT '',
    fence      bigint      NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL DEFAULT 0
);

-- Relay instances alive, so that each takes its fair share of partitions.
CREATE TABLE keel_events_relay_instance (
    owner   text        PRIMARY KEY,
    seen_at INTEGER NOT NULL
);

-- The in-database bus: messages (unique per topic and id, which absorbs
-- republishes), durable consumers and one delivery row per consumer and
-- message until it is acknowledged.
CREATE TABLE keel_events_bus_message (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    topic        text        NOT NULL,
    event_id     text        NOT NULL,
    event_key    text        NOT NULL,
    event_type   text        NOT NULL,
    part         integer     NOT NULL,
    payload      text        NOT NULL,
    headers      text        NOT NULL,
    digest       text        NOT NULL,
    emitted_at   INTEGER NOT NULL,
    published_at INTEGER NOT NULL,
    UNIQUE (topic, event_id)
);
CREATE INDEX keel_events_bus_message_published_idx ON keel_events_bus_message (published_at);

CREATE TABLE keel_events_bus_consumer (
    name       text        PRIMARY KEY,
    topics     text        NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE keel_events_bus_delivery (
    consumer     text        NOT NULL,
    seq          bigint      NOT NULL,
    part         integer     NOT NULL,
    attempt      integer     NOT NULL DEFAULT 0,
    available_at INTEGER NOT NULL,
    lease_owner  text        NOT NULL DEFAULT '',
    PRIMARY KEY (consumer, seq)
);
CREATE INDEX keel_events_bus_delivery_part_idx ON keel_events_bus_delivery (consumer, part, seq);
CREATE INDEX keel_events_bus_delivery_avail_idx ON keel_events_bus_delivery (consumer, available_at);

-- Inbox consumers (Consume), with their duplicate counter.
CREATE TABLE keel_events_consumer (
    name         text        PRIMARY KEY,
    topics       text        NOT NULL,
    ordered      INTEGER     NOT NULL,
    max_attempts integer     NOT NULL,
    created_at   INTEGER NOT NULL,
    duplicates   bigint      NOT NULL DEFAULT 0
);

-- The inbox: one row per consumer and event, committed with the effect.
CREATE TABLE keel_events_inbox (
    consumer   text        NOT NULL,
    topic      text        NOT NULL,
    event_id   text        NOT NULL,
    digest     text        NOT NULL,
    event_key  text        NOT NULL,
    payload    text        NOT NULL,
    state      text        NOT NULL CHECK (state IN ('applied', 'manual')),
    attempts   integer     NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (consumer, topic, event_id)
);

-- Same id, other payload: both kept, never applied.
CREATE TABLE keel_events_quarantine (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer        text        NOT NULL,
    topic           text        NOT NULL,
    event_id        text        NOT NULL,
    event_key       text        NOT NULL,
    applied_digest  text        NOT NULL,
    applied_payload text        NOT NULL,
    digest          text        NOT NULL,
    payload         text        NOT NULL,
    seen            integer     NOT NULL DEFAULT 1,
    at              INTEGER NOT NULL,
    UNIQUE (consumer, topic, event_id, digest)
);

-- A handler that failed past its budget: the event waits for an operator.
CREATE TABLE keel_events_manual (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    consumer    text        NOT NULL,
    topic       text        NOT NULL,
    event_id    text        NOT NULL,
    event_key   text        NOT NULL,
    event_type  text        NOT NULL,
    part        integer     NOT NULL,
    payload     text        NOT NULL,
    headers     text        NOT NULL,
    digest      text        NOT NULL,
    emitted_at  INTEGER NOT NULL,
    attempts    integer     NOT NULL,
    last_error  text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('manual', 'replayed')),
    at          INTEGER NOT NULL,
    replayed_at INTEGER,
    UNIQUE (consumer, topic, event_id)
);

-- Version-monotonic projections: the newest version applied per key, and
-- the older ones that arrived late (recorded, not applied).
CREATE TABLE keel_events_version (
    projection text        NOT NULL,
    proj_key   text        NOT NULL,
    version    bigint      NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (projection, proj_key)
);
CREATE TABLE keel_events_version_stale (
    projection text        NOT NULL,
    proj_key   text        NOT NULL,
    version    bigint      NOT NULL,
    current    bigint      NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (projection, proj_key, version)
);
