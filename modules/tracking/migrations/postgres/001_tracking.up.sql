-- Cross-border tracking: raw carrier events as evidence (never
-- overwritten), collisions quarantined with both payloads, a version-
-- monotonic aggregate per waybill, gaps awaiting backfill, mapping
-- versions with their replays, and the security counters of refused pushes.

CREATE TABLE tracking_mapping_version (
    carrier      text        NOT NULL,
    version      integer     NOT NULL CHECK (version > 0),
    state        text        NOT NULL CHECK (state IN ('draft', 'active', 'retired')),
    note         text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    created_by   text        NOT NULL,
    activated_at timestamptz,
    activated_by text        NOT NULL DEFAULT '',
    PRIMARY KEY (carrier, version)
);
-- One active mapping per carrier.
CREATE UNIQUE INDEX tracking_mapping_version_active_idx ON tracking_mapping_version (carrier) WHERE state = 'active';

CREATE TABLE tracking_mapping (
    carrier   text    NOT NULL,
    version   integer NOT NULL,
    code      text    NOT NULL,
    milestone text    NOT NULL,
    PRIMARY KEY (carrier, version, code),
    FOREIGN KEY (carrier, version) REFERENCES tracking_mapping_version (carrier, version)
);

CREATE TABLE tracking_raw_event (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    carrier         text        NOT NULL,
    waybill         text        NOT NULL,
    idem_key        text        NOT NULL,
    source_event_id text        NOT NULL DEFAULT '',
    seq             bigint      NOT NULL DEFAULT 0,
    code            text        NOT NULL,
    occurred_raw    text        NOT NULL,
    occurred_at     timestamptz,
    time_trusted    boolean     NOT NULL DEFAULT false,
    location        text        NOT NULL DEFAULT '',
    payload         text        NOT NULL,
    payload_digest  text        NOT NULL,
    core_digest     text        NOT NULL,
    via             text        NOT NULL CHECK (via IN ('webhook', 'pull', 'import')),
    received_at     timestamptz NOT NULL,
    -- The result: written when the event is processed (and again only
    -- when an unmapped event finally maps); the evidence columns above
    -- are never updated.
    outcome         text        NOT NULL,
    milestone       text        NOT NULL DEFAULT '',
    mapping_version integer     NOT NULL DEFAULT 0,
    revision        bigint      NOT NULL DEFAULT 0,
    processed_at    timestamptz NOT NULL,
    UNIQUE (carrier, idem_key)
);
CREATE INDEX tracking_raw_event_waybill_idx ON tracking_raw_event (carrier, waybill, seq);
CREATE INDEX tracking_raw_event_unmapped_idx ON tracking_raw_event (carrier, id) WHERE outcome = 'unmapped';

CREATE TABLE tracking_collision (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    carrier      text        NOT NULL,
    idem_key     text        NOT NULL,
    first_raw_id bigint      NOT NULL REFERENCES tracking_raw_event (id),
    waybill      text        NOT NULL,
    payload      text        NOT NULL,
    core_digest  text        NOT NULL,
    via          text        NOT NULL,
    received_at  timestamptz NOT NULL,
    UNIQUE (carrier, idem_key, core_digest)
);

CREATE TABLE tracking_waybill (
    carrier         text        NOT NULL,
    waybill         text        NOT NULL,
    milestone       text        NOT NULL DEFAULT '',
    seq             bigint      NOT NULL DEFAULT 0,
    occurred_at     timestamptz,
    time_trusted    boolean     NOT NULL DEFAULT false,
    event_key       text        NOT NULL DEFAULT '',
    revision        bigint      NOT NULL DEFAULT 0,
    mapping_version integer     NOT NULL DEFAULT 0,
    events          bigint      NOT NULL DEFAULT 0,
    first_seen_at   timestamptz NOT NULL,
    updated_at      timestamptz,
    last_event_at   timestamptz NOT NULL,
    verified_at     timestamptz,
    PRIMARY KEY (carrier, waybill)
);
CREATE INDEX tracking_waybill_search_idx ON tracking_waybill (waybill);

CREATE TABLE tracking_gap (
    carrier       text        NOT NULL,
    waybill       text        NOT NULL,
    seq           bigint      NOT NULL,
    opened_at     timestamptz NOT NULL,
    closed_at     timestamptz,
    closed_raw_id bigint,
    PRIMARY KEY (carrier, waybill, seq)
);
CREATE INDEX tracking_gap_open_idx ON tracking_gap (carrier, opened_at) WHERE closed_at IS NULL;

CREATE TABLE tracking_security (
    carrier text        NOT NULL,
    reason  text        NOT NULL,
    count   bigint      NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (carrier, reason)
);

CREATE TABLE tracking_replay (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    carrier      text        NOT NULL,
    version      integer     NOT NULL,
    base_version integer     NOT NULL,
    created_at   timestamptz NOT NULL,
    created_by   text        NOT NULL,
    waybills     bigint      NOT NULL,
    changed      bigint      NOT NULL,
    diff         text        NOT NULL,
    FOREIGN KEY (carrier, version) REFERENCES tracking_mapping_version (carrier, version)
);
