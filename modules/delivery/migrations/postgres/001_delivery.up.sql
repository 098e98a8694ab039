-- Delivery line, version 1 (PostgreSQL): customers, the Submit mapping,
-- downstream delivery records and gateway connection presence.
--
-- A delivery record moves through pending → awaiting_ack → delivered |
-- rejected | unconfirmed, or failed when the gateway call itself failed;
-- every move is one conditional UPDATE naming the status (and the version
-- or the send token). Records are never deleted by requeue tasks: the
-- engine's batch items refer to them by subject only, so the push evidence
-- (history) outlives any task.

CREATE TABLE dlv_enterprise (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL
);

CREATE TABLE dlv_application (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enterprise_id  bigint      NOT NULL REFERENCES dlv_enterprise (id),
    name           text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    account        text        NOT NULL UNIQUE CHECK (char_length(account) BETWEEN 1 AND 32),
    secret         text        NOT NULL CHECK (char_length(secret) BETWEEN 1 AND 200),
    status         text        NOT NULL CHECK (status IN ('enabled', 'disabled')),
    protocol       text        NOT NULL CHECK (protocol IN ('cmpp20', 'cmpp30', 'http')),
    report_enabled boolean     NOT NULL,
    mo_enabled     boolean     NOT NULL,
    report_compat  boolean     NOT NULL DEFAULT false,
    push_url       text        NOT NULL DEFAULT '',
    mo_code        text        NOT NULL DEFAULT '',
    rate           double precision NOT NULL CHECK (rate > 0),
    version        bigint      NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX dlv_application_enterprise_idx ON dlv_application (enterprise_id, id);

-- The original Submit mapping: the Msg_Id the gateway returned to the
-- customer and, once forwarded, the carrier's Msg_Id that its status
-- reports carry.
CREATE TABLE dlv_submit (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id          bigint      NOT NULL REFERENCES dlv_application (id),
    msg_id          text        NOT NULL,
    phones          text        NOT NULL,
    src_id          text        NOT NULL DEFAULT '',
    service_id      text        NOT NULL DEFAULT '',
    msg_fmt         integer     NOT NULL DEFAULT 0,
    content         bytea       NOT NULL,
    want_report     boolean     NOT NULL,
    upstream_msg_id text,
    upstream_at     timestamptz,
    created_at      timestamptz NOT NULL,
    CONSTRAINT dlv_submit_msg_key UNIQUE (app_id, msg_id)
);
CREATE UNIQUE INDEX dlv_submit_upstream_idx ON dlv_submit (upstream_msg_id) WHERE upstream_msg_id IS NOT NULL;
CREATE INDEX dlv_submit_msg_idx ON dlv_submit (msg_id);

CREATE TABLE dlv_record (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind IN ('report', 'mo')),
    app_id           bigint      NOT NULL REFERENCES dlv_application (id),
    enterprise_id    bigint      NOT NULL,
    submit_id        bigint      REFERENCES dlv_submit (id) ON DELETE SET NULL,
    msg_id           text        NOT NULL,
    phone            text        NOT NULL,
    payload          jsonb,
    upstream_key     text        NOT NULL UNIQUE,
    status           text        NOT NULL CHECK (status IN ('pending', 'awaiting_ack', 'delivered',
                         'failed', 'unconfirmed', 'rejected')),
    prev_status      text        NOT NULL DEFAULT '',
    version          bigint      NOT NULL DEFAULT 1,
    attempts         integer     NOT NULL DEFAULT 0,
    last_error       text        NOT NULL DEFAULT '',
    last_error_class text        NOT NULL DEFAULT '',
    sender           text        NOT NULL DEFAULT '',
    send_token       text        NOT NULL DEFAULT '',
    send_job_id      bigint      NOT NULL DEFAULT 0,
    send_batch_id    bigint      NOT NULL DEFAULT 0,
    conn_id          text        NOT NULL DEFAULT '',
    seq              bigint,
    deliver_msg_id   text        NOT NULL DEFAULT '',
    ack_deadline     timestamptz,
    sent_at          timestamptz,
    acked_at         timestamptz,
    ack_result       bigint,
    history          jsonb       NOT NULL DEFAULT '[]',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
) WITH (fillfactor = 70);
-- No index names a column a push changes (status, version, send_token,
-- history, ...): every transition of a push is then a heap-only update,
-- with no index entry to write, which is most of what a push costs the
-- database. The status filter is served by walking the primary key
-- newest first (the list's order) or by another term's index.
CREATE INDEX dlv_record_created_idx ON dlv_record (created_at, id);
CREATE INDEX dlv_record_app_idx ON dlv_record (app_id, id);
CREATE INDEX dlv_record_enterprise_idx ON dlv_record (enterprise_id, id);
CREATE INDEX dlv_record_msg_idx ON dlv_record (msg_id);
CREATE INDEX dlv_record_phone_idx ON dlv_record (phone);

-- Which gateway instance holds a live connection of which application,
-- refreshed by each instance's heartbeat.
CREATE TABLE dlv_presence (
    app_id       bigint      NOT NULL,
    instance     text        NOT NULL,
    conns        integer     NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, instance)
);
