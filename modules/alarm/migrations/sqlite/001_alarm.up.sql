-- IoT alarms: telemetry kept as evidence (deduplicated by device, metric,
-- boot epoch and device sequence), rule versions, per (device, rule)
-- evaluation tracks moved by compare-and-set on their version, alarm
-- instances (one open per device and rule, enforced here), notices as their
-- own records with their own states, silences, on-call tickets, storms and
-- their audited replays, and per-stage counters.

CREATE TABLE alarm_device (
    id         text        PRIMARY KEY,
    name       text        NOT NULL DEFAULT '',
    gateway    text        NOT NULL DEFAULT '',
    created_at INTEGER     NOT NULL
);

CREATE TABLE alarm_rule (
    id          text             NOT NULL,
    version     integer          NOT NULL CHECK (version > 0),
    metric      text             NOT NULL,
    op          text             NOT NULL CHECK (op IN ('gt', 'lt')),
    warn        REAL             NOT NULL,
    crit        REAL            ,
    severity    integer          NOT NULL CHECK (severity BETWEEN 1 AND 3),
    hold        integer          NOT NULL CHECK (hold >= 1),
    recover     integer          NOT NULL CHECK (recover >= 1),
    nodata_secs integer          NOT NULL CHECK (nodata_secs >= 0),
    min_value   REAL             NOT NULL,
    max_value   REAL             NOT NULL,
    active      INTEGER NOT NULL,
    note        text             NOT NULL DEFAULT '',
    created_at  INTEGER          NOT NULL,
    created_by  text             NOT NULL,
    PRIMARY KEY (id, version)
);
-- One active version per rule.
CREATE UNIQUE INDEX alarm_rule_active_idx ON alarm_rule (id) WHERE active = 1;

-- n orders ordinary evaluation; evaluated is claimed by a conditional
-- update so that each sample is evaluated once across instances.
CREATE TABLE alarm_telemetry (
    n           INTEGER PRIMARY KEY AUTOINCREMENT,
    device      text             NOT NULL,
    metric      text             NOT NULL,
    boot        bigint           NOT NULL,
    seq         bigint           NOT NULL,
    value       REAL             NOT NULL,
    device_at   INTEGER          NOT NULL,
    at          INTEGER          NOT NULL,
    received_at INTEGER          NOT NULL,
    clock_flag  text             NOT NULL DEFAULT '',
    lane        text             NOT NULL,
    evaluated   INTEGER NOT NULL,
    late        INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX alarm_telemetry_key_idx ON alarm_telemetry (device, metric, boot, seq);
CREATE INDEX alarm_telemetry_pending_idx ON alarm_telemetry (n) WHERE evaluated = 0;

CREATE TABLE alarm_quarantine (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    topic       text        NOT NULL,
    payload     text        NOT NULL,
    reason      text        NOT NULL,
    received_at INTEGER     NOT NULL
);

CREATE TABLE alarm_track (
    device       text             NOT NULL,
    rule         text             NOT NULL,
    rule_version integer          NOT NULL,
    state        text             NOT NULL CHECK (state IN ('normal', 'pending', 'firing', 'acked', 'nodata')),
    breach       integer          NOT NULL,
    clear        integer          NOT NULL,
    boot         bigint           NOT NULL,
    seq          bigint           NOT NULL,
    instance_id  text             NOT NULL DEFAULT '',
    last_value   REAL             NOT NULL DEFAULT 0,
    last_at      INTEGER    ,
    ver          bigint           NOT NULL,
    PRIMARY KEY (device, rule)
);

CREATE TABLE alarm_instance (
    id            text             PRIMARY KEY,
    device        text             NOT NULL,
    rule          text             NOT NULL,
    rule_version  integer          NOT NULL,
    state         text             NOT NULL CHECK (state IN ('firing', 'acked', 'nodata', 'recovered')),
    severity      integer          NOT NULL,
    peak_severity integer          NOT NULL,
    peak_value    REAL             NOT NULL,
    first_value   REAL             NOT NULL,
    last_value    REAL             NOT NULL,
    count         bigint           NOT NULL,
    first_at      INTEGER          NOT NULL,
    last_at       INTEGER          NOT NULL,
    boot          bigint           NOT NULL,
    first_seq     bigint           NOT NULL,
    last_seq      bigint           NOT NULL,
    received_at   INTEGER          NOT NULL,
    recovered_at  INTEGER    ,
    acked_at      INTEGER    ,
    acked_by      text             NOT NULL DEFAULT '',
    ack_comment   text             NOT NULL DEFAULT '',
    ver           bigint           NOT NULL,
    flushed_ver   bigint           NOT NULL DEFAULT 0,
    notified_at   INTEGER    
);
-- At most one open instance per device and rule: two simultaneous
-- triggers cannot both open one.
CREATE UNIQUE INDEX alarm_instance_open_idx ON alarm_instance (device, rule) WHERE state <> 'recovered';
CREATE INDEX alarm_instance_rule_idx ON alarm_instance (rule, state);
CREATE INDEX alarm_instance_device_idx ON alarm_instance (device, first_at);

CREATE TABLE alarm_history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id  text             NOT NULL,
    at           INTEGER          NOT NULL,
    from_state   text             NOT NULL,
    to_state     text             NOT NULL,
    reason       text             NOT NULL,
    seq          bigint           NOT NULL,
    value        REAL             NOT NULL,
    rule_version integer          NOT NULL,
    actor        text             NOT NULL DEFAULT ''
);
CREATE INDEX alarm_history_instance_idx ON alarm_history (instance_id, id);

CREATE TABLE alarm_group (
    key           text        PRIMARY KEY,
    next_flush_at INTEGER    ,
    last_flush_at INTEGER    ,
    flushes       bigint      NOT NULL DEFAULT 0
);

-- dedupe_key is (instance or group flush, notice type, escalation level):
-- a notice is created once however often its cause is seen.
CREATE TABLE alarm_notice (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key   text        NOT NULL UNIQUE,
    instance_id  text        NOT NULL DEFAULT '',
    group_key    text        NOT NULL DEFAULT '',
    kind         text        NOT NULL,
    level        integer     NOT NULL,
    lane         text        NOT NULL CHECK (lane IN ('severe', 'ordinary', 'replay')),
    channel      text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('pending', 'held', 'sent', 'muted', 'merged', 'escalated')),
    reason       text        NOT NULL DEFAULT '',
    attempts     integer     NOT NULL DEFAULT 0,
    members      integer     NOT NULL DEFAULT 1,
    body         text        NOT NULL,
    created_at   INTEGER     NOT NULL,
    event_at     INTEGER     NOT NULL,
    sent_at      INTEGER    ,
    replay_id    bigint      NOT NULL DEFAULT 0,
    last_error   text        NOT NULL DEFAULT ''
);
CREATE INDEX alarm_notice_state_idx ON alarm_notice (state, lane);
CREATE INDEX alarm_notice_instance_idx ON alarm_notice (instance_id);

CREATE TABLE alarm_silence (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    device     text        NOT NULL DEFAULT '',
    rule       text        NOT NULL DEFAULT '',
    starts_at  INTEGER     NOT NULL,
    ends_at    INTEGER     NOT NULL,
    created_by text        NOT NULL,
    comment    text        NOT NULL,
    created_at INTEGER     NOT NULL,
    expired_by text        NOT NULL DEFAULT '',
    expired_at INTEGER    
);

CREATE TABLE alarm_ticket (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    notice_id   bigint      NOT NULL UNIQUE,
    instance_id text        NOT NULL,
    reason      text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('open', 'taken')),
    created_at  INTEGER     NOT NULL,
    taken_by    text        NOT NULL DEFAULT '',
    taken_at    INTEGER    
);

CREATE TABLE alarm_storm (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    state        text        NOT NULL CHECK (state IN ('active', 'over')),
    started_at   INTEGER     NOT NULL,
    ended_at     INTEGER    ,
    peak_backlog bigint      NOT NULL DEFAULT 0
);
-- One storm meta-alarm at a time.
CREATE UNIQUE INDEX alarm_storm_active_idx ON alarm_storm (state) WHERE state = 'active';

CREATE TABLE alarm_replay (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    storm_id    bigint      NOT NULL,
    step        integer     NOT NULL,
    rate        integer     NOT NULL,
    planned     integer     NOT NULL,
    sent        integer     NOT NULL,
    merged      integer     NOT NULL,
    severe_p99_ms bigint    NOT NULL,
    verdict     text        NOT NULL,
    actor       text        NOT NULL,
    started_at  INTEGER     NOT NULL,
    finished_at INTEGER     NOT NULL
);

CREATE TABLE alarm_counter (
    stage  text   NOT NULL,
    reason text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (stage, reason)
);

CREATE TABLE alarm_audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER     NOT NULL,
    actor   text        NOT NULL,
    action  text        NOT NULL,
    subject text        NOT NULL,
    detail  text        NOT NULL
);
