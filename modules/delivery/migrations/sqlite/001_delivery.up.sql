-- Delivery line, version 1 (SQLite): customers, the Submit mapping,
-- downstream delivery records and gateway connection presence.
--
-- Times are INTEGER unix microseconds (UTC), like the engine's tables;
-- JSON columns are TEXT. See the PostgreSQL migration for the model.

CREATE TABLE dlv_enterprise (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    created_at INTEGER NOT NULL
);

CREATE TABLE dlv_application (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    enterprise_id  INTEGER NOT NULL REFERENCES dlv_enterprise (id),
    name           TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    account        TEXT    NOT NULL UNIQUE CHECK (length(account) BETWEEN 1 AND 32),
    secret         TEXT    NOT NULL CHECK (length(secret) BETWEEN 1 AND 200),
    status         TEXT    NOT NULL CHECK (status IN ('enabled', 'disabled')),
    protocol       TEXT    NOT NULL CHECK (protocol IN ('cmpp20', 'cmpp30', 'http')),
    report_enabled INTEGER NOT NULL,
    mo_enabled     INTEGER NOT NULL,
    report_compat  INTEGER NOT NULL DEFAULT 0,
    push_url       TEXT    NOT NULL DEFAULT '',
    mo_code        TEXT    NOT NULL DEFAULT '',
    rate           REAL    NOT NULL CHECK (rate > 0),
    version        INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX dlv_application_enterprise_idx ON dlv_application (enterprise_id, id);

CREATE TABLE dlv_submit (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    app_id          INTEGER NOT NULL REFERENCES dlv_application (id),
    msg_id          TEXT    NOT NULL,
    phones          TEXT    NOT NULL,
    src_id          TEXT    NOT NULL DEFAULT '',
    service_id      TEXT    NOT NULL DEFAULT '',
    msg_fmt         INTEGER NOT NULL DEFAULT 0,
    content         BLOB    NOT NULL,
    want_report     INTEGER NOT NULL,
    upstream_msg_id TEXT,
    upstream_at     INTEGER,
    created_at      INTEGER NOT NULL,
    CONSTRAINT dlv_submit_msg_key UNIQUE (app_id, msg_id)
);
CREATE UNIQUE INDEX dlv_submit_upstream_idx ON dlv_submit (upstream_msg_id) WHERE upstream_msg_id IS NOT NULL;
CREATE INDEX dlv_submit_msg_idx ON dlv_submit (msg_id);

CREATE TABLE dlv_record (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL CHECK (kind IN ('report', 'mo')),
    app_id           INTEGER NOT NULL REFERENCES dlv_application (id),
    enterprise_id    INTEGER NOT NULL,
    submit_id        INTEGER REFERENCES dlv_submit (id) ON DELETE SET NULL,
    msg_id           TEXT    NOT NULL,
    phone            TEXT    NOT NULL,
    payload          TEXT,
    upstream_key     TEXT    NOT NULL UNIQUE,
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'awaiting_ack', 'delivered',
                         'failed', 'unconfirmed', 'rejected')),
    prev_status      TEXT    NOT NULL DEFAULT '',
    version          INTEGER NOT NULL DEFAULT 1,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    last_error_class TEXT    NOT NULL DEFAULT '',
    sender           TEXT    NOT NULL DEFAULT '',
    send_token       TEXT    NOT NULL DEFAULT '',
    send_job_id      INTEGER NOT NULL DEFAULT 0,
    send_batch_id    INTEGER NOT NULL DEFAULT 0,
    conn_id          TEXT    NOT NULL DEFAULT '',
    seq              INTEGER,
    deliver_msg_id   TEXT    NOT NULL DEFAULT '',
    ack_deadline     INTEGER,
    sent_at          INTEGER,
    acked_at         INTEGER,
    ack_result       INTEGER,
    history          TEXT    NOT NULL DEFAULT '[]',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX dlv_record_created_idx ON dlv_record (created_at, id);
CREATE INDEX dlv_record_app_idx ON dlv_record (app_id, id);
CREATE INDEX dlv_record_enterprise_idx ON dlv_record (enterprise_id, id);
CREATE INDEX dlv_record_msg_idx ON dlv_record (msg_id);
CREATE INDEX dlv_record_phone_idx ON dlv_record (phone);

CREATE TABLE dlv_presence (
    app_id       INTEGER NOT NULL,
    instance     TEXT    NOT NULL,
    conns        INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    PRIMARY KEY (app_id, instance)
);
