-- Delivery records. Every status change is one conditional UPDATE: the
-- claim names the allowed statuses and the version the caller decided on;
-- outcomes name awaiting_ack and the send token of the attempt they
-- conclude, so a late or foreign outcome changes nothing.
--
-- The filter shared by RecordList, RecordCount, RecordPreview and
-- RecordSubjects: ?1 enterprise, ?2 application, ?3 kind, ?4 status,
-- ?5 created from (inclusive), ?6 created before (exclusive), ?7 snapshot
-- (created at or before), ?8 keyword LIKE pattern. NULL turns a term off.

-- name: RecordInsert
-- The enterprise is the application's, read here: the caller's value (from
-- its in-memory application cache) is only a fallback, since an
-- application created on another instance within the last heartbeat is
-- not in that cache yet, and a record filed under no enterprise drops out
-- of every list that joins its enterprise.
INSERT INTO dlv_record (kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key,
    status, history, created_at, updated_at)
VALUES (?1, ?2, COALESCE((SELECT enterprise_id FROM dlv_application WHERE id = ?2), ?3), ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
ON CONFLICT (upstream_key) DO NOTHING
RETURNING id;

-- name: RecordGet
SELECT id, kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key, status,
       prev_status, version, attempts, last_error, last_error_class, sender, send_token, send_job_id,
       send_batch_id, conn_id, seq, deliver_msg_id, ack_deadline, sent_at, acked_at, ack_result, history,
       created_at, updated_at
FROM dlv_record WHERE id = ?1;

-- name: RecordsByIDs
SELECT r.id, r.kind, r.app_id, r.enterprise_id, r.submit_id, r.msg_id, r.phone, r.payload, r.upstream_key,
       r.status, r.prev_status, r.version, r.attempts, r.last_error, r.last_error_class, r.sender,
       r.send_token, r.send_job_id, r.send_batch_id, r.conn_id, r.seq, r.deliver_msg_id, r.ack_deadline,
       r.sent_at, r.acked_at, r.ack_result, r.history, r.created_at, r.updated_at,
       a.name, a.account, e.name
FROM dlv_record r
JOIN dlv_application a ON a.id = r.app_id
JOIN dlv_enterprise e ON e.id = r.enterprise_id
WHERE r.id IN (SELECT value FROM json_each(?1))
ORDER BY r.id DESC;

-- name: RecordIDsByMsgID
SELECT id FROM dlv_record WHERE msg_id = ?1 ORDER BY id LIMIT 100;

-- name: RecordClaim
-- The attempt begins: awaiting_ack with its token, sender and deadline,
-- before anything is written to the customer, so that a crash after the
-- write can never leave the record looking unsent. A record without
-- payload, or a report without its Submit mapping, is never claimed. An
-- MO is re-pushed under its own Msg_Id (the customer's dedupe key).
UPDATE dlv_record
SET status = 'awaiting_ack', prev_status = status, version = version + 1, attempts = attempts + 1,
    sender = ?4, send_token = ?5, send_job_id = ?6, send_batch_id = ?7, conn_id = ?8, seq = NULL,
    deliver_msg_id = CASE WHEN kind = 'mo' THEN msg_id ELSE ?9 END, ack_deadline = ?10, sent_at = ?11, acked_at = NULL, ack_result = NULL,
    updated_at = ?11, history = json_insert(history, '$[#]', json(?12))
WHERE id = ?1
  AND payload IS NOT NULL AND (kind = 'mo' OR submit_id IS NOT NULL)
  AND status IN (SELECT value FROM json_each(?2))
  AND (?3 = 0 OR version = ?3)
RETURNING id, kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key, status,
          prev_status, version, attempts, last_error, last_error_class, sender, send_token, send_job_id,
          send_batch_id, conn_id, seq, deliver_msg_id, ack_deadline, sent_at, acked_at, ack_result, history,
          created_at, updated_at;

-- name: RecordSetSeq
UPDATE dlv_record SET seq = ?3
WHERE id = ?1 AND send_token = ?2 AND status = 'awaiting_ack';

-- name: RecordRevert
-- Nothing reached the customer (no connection at write time): the claim is
-- undone and the attempt not counted.
UPDATE dlv_record
SET status = prev_status, version = version + 1, attempts = attempts - 1, conn_id = '',
    deliver_msg_id = '', ack_deadline = NULL, updated_at = ?3, history = json_insert(history, '$[#]', json(?4))
WHERE id = ?1 AND send_token = ?2 AND status = 'awaiting_ack'
RETURNING version;

-- name: RecordFinishMany
-- Concludes attempts: ?1 is a JSON array of {id, token, status, error,
-- class, result, seq, acked, event}; only rows still awaiting_ack under
-- the same token change.
UPDATE dlv_record AS r
SET status = v.status, version = r.version + 1, last_error = v.error, last_error_class = v.class,
    ack_result = v.result, seq = coalesce(v.seq, r.seq),
    acked_at = CASE WHEN v.acked THEN ?2 ELSE NULL END,
    updated_at = ?2, history = json_insert(r.history, '$[#]', json(v.event))
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.status') AS status, json_extract(value, '$.error') AS error,
             json_extract(value, '$.class') AS class, json_extract(value, '$.result') AS result,
             json_extract(value, '$.seq') AS seq, json_extract(value, '$.acked') AS acked,
             json_extract(value, '$.event') AS event
      FROM json_each(?1)) AS v
WHERE r.id = v.id AND r.send_token = v.token AND r.status = 'awaiting_ack'
  AND v.status IN ('delivered', 'rejected', 'unconfirmed', 'failed')
RETURNING id, version;

-- name: RecordFailUnsent
-- The gateway was not called and will not be (application disabled,
-- data incomplete): pending → failed.
UPDATE dlv_record
SET status = 'failed', version = version + 1, last_error = ?3, last_error_class = ?4, updated_at = ?5,
    history = json_insert(history, '$[#]', json(?6))
WHERE id = ?1 AND version = ?2 AND status = 'pending'
RETURNING version;

-- name: RecordRequeue
-- A single or page requeue: back to pending from an allowed status, as
-- of the version the operator saw.
UPDATE dlv_record
SET status = 'pending', prev_status = status, version = version + 1, updated_at = ?4,
    history = json_insert(history, '$[#]', json(?5))
WHERE id = ?1 AND version = ?2 AND status IN (SELECT value FROM json_each(?3))
RETURNING version;

-- name: RecordHistoryAppend
UPDATE dlv_record SET history = json_insert(history, '$[#]', json(?2)) WHERE id = ?1;

-- name: RecordFilter
-- The records a filter selects (seed §2), joined with their application
-- and enterprise for the keyword: written once and included by the list,
-- its count, a task's preview and its snapshot, so the preview's counts
-- follow exactly what the list shows and the task takes.
FROM dlv_record r
JOIN dlv_application a ON a.id = r.app_id
JOIN dlv_enterprise e ON e.id = r.enterprise_id
WHERE (?1 IS NULL OR r.enterprise_id = ?1)
  AND (?2 IS NULL OR r.app_id = ?2)
  AND (?3 IS NULL OR r.kind = ?3)
  AND (?4 IS NULL OR r.status = ?4)
  AND (?5 IS NULL OR r.created_at >= ?5)
  AND (?6 IS NULL OR r.created_at < ?6)
  AND (?7 IS NULL OR r.created_at <= ?7)
  AND (?8 IS NULL OR r.msg_id LIKE ?8 ESCAPE '\' OR r.phone LIKE ?8 ESCAPE '\' OR r.last_error LIKE ?8 ESCAPE '\'
       OR a.account LIKE ?8 ESCAPE '\' OR a.name LIKE ?8 ESCAPE '\' OR e.name LIKE ?8 ESCAPE '\')

-- name: RecordList
SELECT r.id, r.kind, r.app_id, r.enterprise_id, r.submit_id, r.msg_id, r.phone, r.payload, r.upstream_key,
       r.status, r.prev_status, r.version, r.attempts, r.last_error, r.last_error_class, r.sender,
       r.send_token, r.send_job_id, r.send_batch_id, r.conn_id, r.seq, r.deliver_msg_id, r.ack_deadline,
       r.sent_at, r.acked_at, r.ack_result, r.history, r.created_at, r.updated_at,
       a.name, a.account, e.name
-- include: RecordFilter
ORDER BY r.id DESC
LIMIT ?9 OFFSET ?10;

-- name: RecordCount
SELECT count(*)
-- include: RecordFilter
;

-- name: RecordPreview
-- Counts per (status, application) under the filter at the snapshot.
SELECT r.status, r.app_id, count(*), min(r.created_at)
-- include: RecordFilter
GROUP BY r.status, r.app_id;

-- name: RecordSubjects
-- One keyset page of eligible records (?9: statuses as a JSON array,
-- ?10: after id, ?11: page size).
SELECT r.id, r.app_id, r.status, r.version
-- include: RecordFilter
  AND r.status IN (SELECT value FROM json_each(?9))
  AND r.id > ?10
ORDER BY r.id
LIMIT ?11;

-- name: RecordInsertMany
-- Bulk ingestion (?1: JSON array of records; ?2: creation time); used by
-- the load benchmark's seeding. Repeated upstream keys are skipped.
INSERT INTO dlv_record (kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key, status,
    history, created_at, updated_at)
SELECT json_extract(value, '$.kind'), json_extract(value, '$.app_id'), json_extract(value, '$.enterprise_id'),
       json_extract(value, '$.submit_id'), json_extract(value, '$.msg_id'), json_extract(value, '$.phone'),
       json(json_extract(value, '$.payload')), json_extract(value, '$.upstream_key'), 'pending', '[]', ?2, ?2
FROM json_each(?1) WHERE true
ON CONFLICT (upstream_key) DO NOTHING
RETURNING id, app_id, upstream_key;

-- name: RecordClaimMany
-- RecordClaim for many attempts in one statement (?1: JSON array of
-- {id, from, version, sender, token, job_id, batch_id, conn_id, outer_id,
-- deadline, event}; ?2: now). When two attempts name the same record,
-- one wins: its token is in the returned row.
UPDATE dlv_record AS r
SET status = 'awaiting_ack', prev_status = r.status, version = r.version + 1, attempts = r.attempts + 1,
    sender = v.sender, send_token = v.token, send_job_id = v.job_id, send_batch_id = v.batch_id,
    conn_id = v.conn_id, seq = NULL,
    deliver_msg_id = CASE WHEN r.kind = 'mo' THEN r.msg_id ELSE v.outer_id END,
    ack_deadline = v.deadline, sent_at = ?2, acked_at = NULL, ack_result = NULL, updated_at = ?2,
    history = json_insert(r.history, '$[#]', json(v.event))
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.from') AS "from",
             json_extract(value, '$.version') AS version, json_extract(value, '$.sender') AS sender,
             json_extract(value, '$.token') AS token, json_extract(value, '$.job_id') AS job_id,
             json_extract(value, '$.batch_id') AS batch_id, json_extract(value, '$.conn_id') AS conn_id,
             json_extract(value, '$.outer_id') AS outer_id, json_extract(value, '$.deadline_us') AS deadline,
             json_extract(value, '$.event') AS event
      FROM json_each(?1)) AS v
WHERE r.id = v.id
  AND r.payload IS NOT NULL AND (r.kind = 'mo' OR r.submit_id IS NOT NULL)
  AND r.status IN (SELECT value FROM json_each(v."from"))
  AND (v.version = 0 OR r.version = v.version)
RETURNING id, kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key, status,
          prev_status, version, attempts, last_error, last_error_class, sender, send_token, send_job_id,
          send_batch_id, conn_id, seq, deliver_msg_id, ack_deadline, sent_at, acked_at, ack_result, history,
          created_at, updated_at;
