-- name: DeviceUpsert
INSERT INTO alarm_device (id, name, gateway, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING;

-- name: DeviceGet
SELECT id, name, gateway, created_at FROM alarm_device WHERE id = $1;

-- name: DeviceList
SELECT id, name, gateway, created_at FROM alarm_device ORDER BY id LIMIT $1;

-- name: DeviceSearch
SELECT id, name, gateway, created_at FROM alarm_device WHERE id LIKE $1 || '%' ORDER BY id LIMIT 5;

-- name: RuleInsertInitial
-- Version 1 from the defaults: instances starting together all try it and
-- the first one inserts.
INSERT INTO alarm_rule (id, version, metric, op, warn, crit, severity, hold, recover, nodata_secs, min_value, max_value,
    active, note, created_at, created_by)
VALUES ($1, 1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, true, $12, $13, $14)
ON CONFLICT DO NOTHING;

-- name: RuleRetire
UPDATE alarm_rule SET active = false WHERE id = $1 AND active;

-- name: RuleInsertNext
INSERT INTO alarm_rule (id, version, metric, op, warn, crit, severity, hold, recover, nodata_secs, min_value, max_value,
    active, note, created_at, created_by)
SELECT $1, coalesce(max(version), 0) + 1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, true, $12, $13, $14
FROM alarm_rule WHERE id = $1
RETURNING version;

-- name: RulesActive
SELECT id, version, metric, op, warn, crit, severity, hold, recover, nodata_secs, min_value, max_value, note, created_at, created_by
FROM alarm_rule WHERE active ORDER BY id;

-- name: TelemetryInsert
INSERT INTO alarm_telemetry (device, metric, boot, seq, value, device_at, at, received_at, clock_flag, lane, evaluated)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (device, metric, boot, seq) DO NOTHING
RETURNING n;

-- name: TelemetryInsertBatch
-- One statement for a batch of samples (a JSON array), so that ingestion
-- costs one round trip per batch; duplicates are absorbed by the key.
INSERT INTO alarm_telemetry (device, metric, boot, seq, value, device_at, at, received_at, clock_flag, lane, evaluated)
SELECT r.device, r.metric, r.boot, r.seq, r.value,
    timestamptz 'epoch' + r.device_us * interval '1 microsecond',
    timestamptz 'epoch' + r.at_us * interval '1 microsecond',
    timestamptz 'epoch' + r.received_us * interval '1 microsecond',
    r.clock_flag, 'ordinary', false
FROM jsonb_to_recordset($1::jsonb) AS r(device text, metric text, boot bigint, seq bigint, value double precision,
    device_us bigint, at_us bigint, received_us bigint, clock_flag text)
ON CONFLICT (device, metric, boot, seq) DO NOTHING;

-- name: TelemetryPending
SELECT n, device, metric, boot, seq, value, at, received_at FROM alarm_telemetry
WHERE NOT evaluated ORDER BY n LIMIT $1;

-- name: TelemetryClaim
UPDATE alarm_telemetry SET evaluated = true WHERE n = $1 AND NOT evaluated;

-- name: TelemetryLate
UPDATE alarm_telemetry SET late = true WHERE n = $1;

-- name: TelemetryBacklog
SELECT count(*), coalesce(min(received_at), now()) FROM alarm_telemetry WHERE NOT evaluated;

-- name: TelemetryOfDevice
SELECT metric, boot, seq, value, device_at, at, received_at, clock_flag, lane, late FROM alarm_telemetry
WHERE device = $1 ORDER BY n DESC LIMIT $2;

-- name: QuarantineInsert
INSERT INTO alarm_quarantine (topic, payload, reason, received_at) VALUES ($1, $2, $3, $4);

-- name: QuarantineList
SELECT id, topic, payload, reason, received_at FROM alarm_quarantine ORDER BY id DESC LIMIT $1;

-- name: TrackGet
SELECT t.device, t.rule, t.rule_version, t.state, t.breach, t.clear, t.boot, t.seq, t.instance_id, t.last_value, t.last_at, t.ver,
    coalesce(i.severity, 0), i.acked_at IS NOT NULL
FROM alarm_track t LEFT JOIN alarm_instance i ON i.id = t.instance_id AND t.instance_id <> ''
WHERE t.device = $1 AND t.rule = $2;

-- name: TrackInsert
INSERT INTO alarm_track (device, rule, rule_version, state, breach, clear, boot, seq, ver)
VALUES ($1, $2, $3, 'normal', 0, 0, -1, 0, 0)
ON CONFLICT (device, rule) DO NOTHING;

-- name: TrackCAS
-- Compare-and-set: a writer that read an older version changes nothing
-- and reads again.
UPDATE alarm_track SET rule_version = $4, state = $5, breach = $6, clear = $7, boot = $8, seq = $9, instance_id = $10,
    last_value = $11, last_at = $12, ver = ver + 1
WHERE device = $1 AND rule = $2 AND ver = $3;

-- name: TrackNoData
-- An open instance without samples: 无数据, not recovered.
SELECT device, rule, instance_id, ver FROM alarm_track
WHERE state IN ('firing', 'acked') AND last_at < $1 AND rule = $2 LIMIT 500;

-- name: TrackToNoData
UPDATE alarm_track SET state = 'nodata', ver = ver + 1 WHERE device = $1 AND rule = $2 AND ver = $3;

-- name: TrackAck
UPDATE alarm_track SET state = 'acked', ver = ver + 1 WHERE instance_id = $1 AND state = 'firing';

-- name: TracksActive
SELECT device, rule FROM alarm_track WHERE state <> 'normal';

-- name: InstanceInsert
INSERT INTO alarm_instance (id, device, rule, rule_version, state, severity, peak_severity, peak_value, first_value, last_value,
    count, first_at, last_at, boot, first_seq, last_seq, received_at, ver, flushed_ver)
VALUES ($1, $2, $3, $4, 'firing', $5, $5, $6, $6, $6, 1, $7, $7, $8, $9, $9, $10, 1, $11);

-- name: InstanceRepeat
-- This and the other updates of one instance write their state test as
-- "(…) IS TRUE": the same meaning, but it cannot prove the predicate of
-- alarm_instance_open_idx. With a plain state test and statistics taken
-- while few instances were open (most recovered), the generic plan walked
-- every open instance's index entry to find the one id, so in a storm each
-- repeat, escalation or recovery cost as much as all open alarms
-- (TestPlansAfterAnalyze).
UPDATE alarm_instance SET count = count + 1, last_at = $2, last_value = $3, last_seq = $4,
    peak_value = CASE WHEN $5 = 'gt' AND $3 > peak_value OR $5 = 'lt' AND $3 < peak_value THEN $3 ELSE peak_value END
WHERE id = $1 AND (state <> 'recovered') IS TRUE;

-- name: InstanceClearing
UPDATE alarm_instance SET last_at = $2, last_value = $3, last_seq = $4 WHERE id = $1 AND (state <> 'recovered') IS TRUE;

-- name: InstanceEscalate
UPDATE alarm_instance SET severity = $2, peak_severity = greatest(peak_severity, $2), ver = ver + 1
WHERE id = $1 AND (state <> 'recovered') IS TRUE AND severity < $2;

-- name: InstanceResume
UPDATE alarm_instance SET state = CASE WHEN acked_at IS NULL THEN 'firing' ELSE 'acked' END, ver = ver + 1
WHERE id = $1 AND (state = 'nodata') IS TRUE;

-- name: InstanceNoData
UPDATE alarm_instance SET state = 'nodata', ver = ver + 1 WHERE id = $1 AND (state IN ('firing', 'acked')) IS TRUE;

-- name: InstanceRecover
UPDATE alarm_instance SET state = 'recovered', recovered_at = $2, last_at = $2, last_value = $3, last_seq = $4, ver = ver + 1
WHERE id = $1 AND (state <> 'recovered') IS TRUE;

-- name: InstanceAck
UPDATE alarm_instance SET state = 'acked', acked_at = $2, acked_by = $3, ack_comment = $4, ver = ver + 1
WHERE id = $1 AND (state = 'firing') IS TRUE;

-- name: InstanceGet
-- include: InstanceCols
FROM alarm_instance WHERE id = $1;

-- name: InstanceCols
SELECT id, device, rule, rule_version, state, severity, peak_severity, peak_value, first_value, last_value, count,
    first_at, last_at, boot, first_seq, last_seq, received_at, recovered_at, acked_at, acked_by, ack_comment, ver, flushed_ver

-- name: InstanceList
-- include: InstanceCols
FROM alarm_instance WHERE ($1 = '' OR state = $1) AND ($2 = '' OR device = $2) AND ($3 = '' OR rule = $3)
ORDER BY (state = 'recovered'), peak_severity DESC, first_at DESC LIMIT $4;

-- name: InstanceSearch
-- include: InstanceCols
FROM alarm_instance WHERE id LIKE $1 || '%' ORDER BY first_at DESC LIMIT 5;

-- name: InstanceDirty
-- include: InstanceCols
FROM alarm_instance WHERE rule = $1 AND peak_severity < 3 AND (ver > flushed_ver OR state <> 'recovered' AND notified_at < $2)
ORDER BY first_at LIMIT 2000;

-- name: InstanceFlushed
UPDATE alarm_instance SET flushed_ver = $2, notified_at = $3 WHERE id = $1 AND flushed_ver < $2;

-- name: InstanceFiringCounts
SELECT severity, count(*) FROM alarm_instance WHERE state <> 'recovered' GROUP BY severity;

-- name: InstanceOpenSevere
SELECT device, rule FROM alarm_instance WHERE state <> 'recovered' AND severity >= 3;

-- name: HistoryInsert
INSERT INTO alarm_history (instance_id, at, from_state, to_state, reason, seq, value, rule_version, actor)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: HistoryOf
SELECT at, from_state, to_state, reason, seq, value, rule_version, actor FROM alarm_history
WHERE instance_id = $1 ORDER BY id;

-- name: GroupTouch
-- A change in a group: its next flush is group_wait after a first change,
-- group_interval after the last flush (Alertmanager's timing); a flush
-- already due is kept.
INSERT INTO alarm_group (key, next_flush_at) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET next_flush_at = coalesce(alarm_group.next_flush_at,
    CASE WHEN alarm_group.last_flush_at IS NULL THEN $2 ELSE greatest($2, alarm_group.last_flush_at + $3 * interval '1 microsecond') END);

-- name: GroupsDue
SELECT key, next_flush_at, flushes FROM alarm_group WHERE next_flush_at <= $1 ORDER BY next_flush_at LIMIT 100;

-- name: GroupsRepeatDue
SELECT DISTINCT i.rule FROM alarm_instance i JOIN alarm_group g ON g.key = i.rule
WHERE i.state <> 'recovered' AND i.peak_severity < 3 AND i.notified_at < $1 AND g.next_flush_at IS NULL LIMIT 100;

-- name: GroupSchedule
UPDATE alarm_group SET next_flush_at = $2 WHERE key = $1 AND next_flush_at IS NULL;

-- name: GroupClaim
UPDATE alarm_group SET next_flush_at = NULL, last_flush_at = $3, flushes = flushes + 1
WHERE key = $1 AND next_flush_at = $2 AND flushes = $4;

-- name: NoticeInsert
INSERT INTO alarm_notice (dedupe_key, instance_id, group_key, kind, level, lane, channel, state, reason, members, body,
    created_at, event_at, replay_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id;

-- name: NoticeCols
SELECT id, dedupe_key, instance_id, group_key, kind, level, lane, channel, state, reason, attempts, members, body,
    created_at, event_at, sent_at, replay_id, last_error

-- name: NoticeGet
-- include: NoticeCols
FROM alarm_notice WHERE id = $1;

-- name: NoticeList
-- include: NoticeCols
FROM alarm_notice WHERE ($1 = '' OR state = $1) AND ($2 = '' OR instance_id = $2) ORDER BY id DESC LIMIT $3;

-- name: NoticeHeld
-- include: NoticeCols
FROM alarm_notice WHERE state = 'held' ORDER BY id LIMIT $1;

-- name: NoticeMerge
-- The updates of one notice write their state test as "(…) IS TRUE" so
-- that it is no index condition of alarm_notice_state_idx (state, lane):
-- analyzed while few notices were pending or held, the generic plan walked
-- every one of them for the one id (TestPlansAfterAnalyze). ReconSevere
-- does the same to reach an instance's notices by alarm_notice_instance_idx.
UPDATE alarm_notice SET state = 'merged', replay_id = $2 WHERE id = $1 AND (state = 'held') IS TRUE;

-- name: NoticeRelease
UPDATE alarm_notice SET state = 'pending', replay_id = $2 WHERE id = $1 AND (state = 'held') IS TRUE;

-- name: NoticeAttempt
UPDATE alarm_notice SET attempts = attempts + 1, last_error = $2 WHERE id = $1 AND (state = 'pending') IS TRUE;

-- name: NoticeSent
UPDATE alarm_notice SET state = 'sent', sent_at = $2, attempts = attempts + 1, last_error = '' WHERE id = $1 AND (state = 'pending') IS TRUE;

-- name: NoticeEscalated
UPDATE alarm_notice SET state = 'escalated', last_error = $2 WHERE id = $1 AND (state = 'pending') IS TRUE;

-- name: NoticeCounts
SELECT lane, state, count(*) FROM alarm_notice GROUP BY lane, state;

-- name: NoticeSevereLatencies
-- Severe notices sent since $1: from the sample's receipt to the channel's
-- confirmation, in microseconds.
SELECT event_at, sent_at FROM alarm_notice WHERE lane = 'severe' AND state = 'sent' AND sent_at >= $1 ORDER BY sent_at DESC LIMIT 5000;

-- name: SilenceInsert
INSERT INTO alarm_silence (device, rule, starts_at, ends_at, created_by, comment, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id;

-- name: SilenceMatch
SELECT id FROM alarm_silence WHERE expired_at IS NULL AND starts_at <= $3 AND ends_at > $3
    AND (device = '' OR device = $1) AND (rule = '' OR rule = $2) ORDER BY id LIMIT 1;

-- name: SilenceExpire
UPDATE alarm_silence SET expired_at = $2, expired_by = $3 WHERE id = $1 AND expired_at IS NULL;

-- name: SilenceList
SELECT id, device, rule, starts_at, ends_at, created_by, comment, created_at, expired_by, expired_at
FROM alarm_silence ORDER BY id DESC LIMIT $1;

-- name: TicketInsert
INSERT INTO alarm_ticket (notice_id, instance_id, reason, state, created_at) VALUES ($1, $2, $3, 'open', $4)
ON CONFLICT (notice_id) DO NOTHING;

-- name: TicketTake
UPDATE alarm_ticket SET state = 'taken', taken_by = $2, taken_at = $3 WHERE id = $1 AND state = 'open';

-- name: TicketList
SELECT id, notice_id, instance_id, reason, state, created_at, taken_by, taken_at FROM alarm_ticket ORDER BY id DESC LIMIT $1;

-- name: StormOpen
INSERT INTO alarm_storm (state, started_at, peak_backlog) VALUES ('active', $1, $2)
ON CONFLICT DO NOTHING RETURNING id;

-- name: StormActive
SELECT id, started_at, peak_backlog FROM alarm_storm WHERE state = 'active';

-- name: StormPeak
UPDATE alarm_storm SET peak_backlog = $2 WHERE id = $1 AND peak_backlog < $2;

-- name: StormClose
UPDATE alarm_storm SET state = 'over', ended_at = $2 WHERE id = $1 AND state = 'active';

-- name: StormList
SELECT id, state, started_at, ended_at, peak_backlog FROM alarm_storm ORDER BY id DESC LIMIT $1;

-- name: ReplayInsert
INSERT INTO alarm_replay (storm_id, step, rate, planned, sent, merged, severe_p99_ms, verdict, actor, started_at, finished_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: ReplayList
SELECT id, storm_id, step, rate, planned, sent, merged, severe_p99_ms, verdict, actor, started_at, finished_at
FROM alarm_replay WHERE ($1 = 0 OR storm_id = $1) ORDER BY id LIMIT 200;

-- name: CounterAdd
INSERT INTO alarm_counter (stage, reason, n) VALUES ($1, $2, $3)
ON CONFLICT (stage, reason) DO UPDATE SET n = alarm_counter.n + excluded.n;

-- name: CounterList
SELECT stage, reason, n FROM alarm_counter ORDER BY stage, reason;

-- name: AuditInsert
INSERT INTO alarm_audit (at, actor, action, subject, detail) VALUES ($1, $2, $3, $4, $5);

-- name: AuditList
SELECT at, actor, action, subject, detail FROM alarm_audit ORDER BY id DESC LIMIT $1;

-- name: ReconSevere
-- Every severe instance opened before the cutoff, with whether a severe
-- notice of it reached the channel and whether a person took it over.
SELECT i.id, i.device, i.rule,
    EXISTS (SELECT 1 FROM alarm_notice n WHERE n.instance_id = i.id AND n.lane = 'severe' AND n.kind IN ('firing', 'escalated') AND (n.state = 'sent') IS TRUE),
    EXISTS (SELECT 1 FROM alarm_notice n WHERE n.instance_id = i.id AND n.lane = 'severe' AND (n.state = 'muted') IS TRUE),
    i.acked_at IS NOT NULL OR EXISTS (SELECT 1 FROM alarm_ticket k WHERE k.instance_id = i.id AND k.state = 'taken')
FROM alarm_instance i WHERE i.peak_severity >= 3 AND i.received_at < $1 AND i.id > $2 ORDER BY i.id LIMIT 500;
