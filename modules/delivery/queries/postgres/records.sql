-- Delivery records. Every status change is one conditional UPDATE: the
-- claim names the allowed statuses and the version the caller decided on;
-- outcomes name awaiting_ack and the send token of the attempt they
-- conclude, so a late or foreign outcome changes nothing.
--
-- The filter shared by RecordList, RecordCount, RecordPreview and
-- RecordSubjects: $1 enterprise, $2 application, $3 kind, $4 status,
-- $5 created from (inclusive), $6 created before (exclusive), $7 snapshot
-- (created at or before), $8 keyword LIKE pattern. NULL turns a term off.

-- name: RecordInsert
-- The enterprise is the application's, read here: the caller's value (from
-- its in-memory application cache) is only a fallback, since an
-- application created on another instance within the last heartbeat is
-- not in that cache yet, and a record filed under no enterprise drops out
-- of every list that joins its enterprise.
INSERT INTO dlv_record (kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key,
    status, history, created_at, updated_at)
VALUES ($1, $2, COALESCE((SELECT enterprise_id FROM dlv_application WHERE id = $2), $3), $4, $5, $6, $7, $8, $9, $10, $11, $11)
ON CONFLICT (upstream_key) DO NOTHING
RETURNING id;

-- name: RecordGet
SELECT id, kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key, status,
       prev_status, version, attempts, last_error, last_error_class, sender, send_token, send_job_id,
       send_batch_id, conn_id, seq, deliver_msg_id, ack_deadline, sent_at, acked_at, ack_result, history,
       created_at, updated_at
FROM dlv_record WHERE id = $1;

-- name: RecordsByIDs
SELECT r.id, r.kind, r.app_id, r.enterprise_id, r.submit_id, r.msg_id, r.phone, r.payload, r.upstream_key,
       r.status, r.prev_status, r.version, r.attempts, r.last_error, r.last_error_class, r.sender,
       r.send_token, r.send_job_id, r.send_batch_id, r.conn_id, r.seq, r.deliver_msg_id, r.ack_deadline,
       r.sent_at, r.acked_at, r.ack_result, r.history, r.created_at, r.updated_at,
       a.name, a.account, e.name
FROM dlv_record r
JOIN dlv_application a ON a.id = r.app_id
JOIN dlv_enterprise e ON e.id = r.enterprise_id
WHERE r.id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint)
ORDER BY r.id DESC;

-- name: RecordIDsByMsgID
SELECT id FROM dlv_record WHERE msg_id = $1 ORDER BY id LIMIT 100;

-- name: RecordClaim
-- The attempt begins: awaiting_ack with its token, sender and deadline,
-- before anything is written to the customer, so that a crash after the
-- write can never leave the record looking unsent. A record without
-- payload, or a report without its Submit mapping, is never claimed. An
-- MO is re-pushed under its own Msg_Id (the customer's dedupe key).
UPDATE dlv_record
SET status = 'awaiting_ack', prev_status = status, version = version + 1, attempts = attempts + 1,
    sender = $4, send_token = $5, send_job_id = $6, send_batch_id = $7, conn_id = $8, seq = NULL,
    deliver_msg_id = CASE WHEN kind = 'mo' THEN msg_id ELSE $9 END, ack_deadline = $10, sent_at = $11, acked_at = NULL, ack_result = NULL,
    updated_at = $11, history = history || $12::jsonb
WHERE id = $1
  AND payload IS NOT NULL AND (kind = 'mo' OR submit_id IS NOT NULL)
  AND status IN (SELECT jsonb_array_elements_text($2::jsonb))
  AND ($3::bigint = 0 OR version = $3)
RETURNING id, kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key, status,
          prev_status, version, attempts, last_error, last_error_class, sender, send_token, send_job_id,
          send_batch_id, conn_id, seq, deliver_msg_id, ack_deadline, sent_at, acked_at, ack_result, history,
          created_at, updated_at;

-- name: RecordSetSeq
UPDATE dlv_record SET seq = $3
WHERE id = $1 AND send_token = $2 AND status = 'awaiting_ack';

-- name: RecordRevert
-- Nothing reached the customer (no connection at write time): the claim is
-- undone and the attempt not counted.
UPDATE dlv_record
SET status = prev_status, version = version + 1, attempts = attempts - 1, conn_id = '',
    deliver_msg_id = '', ack_deadline = NULL, updated_at = $3, history = history || $4::jsonb
WHERE id = $1 AND send_token = $2 AND status = 'awaiting_ack'
RETURNING version;

-- name: RecordFinishMany
-- Concludes attempts: $1 is a JSON array of {id, token, status, error,
-- class, result, seq, acked, event}; only rows still awaiting_ack under
-- the same token change.
UPDATE dlv_record r
SET status = v.status, version = r.version + 1, last_error = v.error, last_error_class = v.class,
    ack_result = v.result, seq = coalesce(v.seq, r.seq),
    acked_at = CASE WHEN v.acked THEN $2::timestamptz ELSE NULL END,
    updated_at = $2, history = r.history || jsonb_build_array(v.event)
FROM jsonb_to_recordset($1::jsonb) AS v (id bigint, token text, status text, error text, class text,
    result bigint, seq bigint, acked boolean, event jsonb)
WHERE r.id = v.id AND r.send_token = v.token AND r.status = 'awaiting_ack'
  AND v.status IN ('delivered', 'rejected', 'unconfirmed', 'failed')
RETURNING r.id, r.version;

-- name: RecordFailUnsent
-- The gateway was not called and will not be (application disabled,
-- data incomplete): pending → failed.
UPDATE dlv_record
SET status = 'failed', version = version + 1, last_error = $3, last_error_class = $4, updated_at = $5,
    history = history || $6::jsonb
WHERE id = $1 AND version = $2 AND status = 'pending'
RETURNING version;

-- name: RecordRequeue
-- A single or page requeue: back to pending from an allowed status, as
-- of the version the operator saw.
UPDATE dlv_record
SET status = 'pending', prev_status = status, version = version + 1, updated_at = $4,
    history = history || $5::jsonb
WHERE id = $1 AND version = $2 AND status IN (SELECT jsonb_array_elements_text($3::jsonb))
RETURNING version;

-- name: RecordHistoryAppend
UPDATE dlv_record SET history = history || $2::jsonb WHERE id = $1;

-- name: RecordFilter
-- The records a filter selects (seed §2), joined with their application
-- and enterprise for the keyword: written once and included by the list,
-- its count, a task's preview and its snapshot, so the preview's counts
-- follow exactly what the list shows and the task takes.
FROM dlv_record r
JOIN dlv_application a ON a.id = r.app_id
JOIN dlv_enterprise e ON e.id = r.enterprise_id
WHERE ($1::bigint IS NULL OR r.enterprise_id = $1)
  AND ($2::bigint IS NULL OR r.app_id = $2)
  AND ($3::text IS NULL OR r.kind = $3)
  AND ($4::text IS NULL OR r.status = $4)
  AND ($5::timestamptz IS NULL OR r.created_at >= $5)
  AND ($6::timestamptz IS NULL OR r.created_at < $6)
  AND ($7::timestamptz IS NULL OR r.created_at <= $7)
  AND ($8::text IS NULL OR r.msg_id ILIKE $8 OR r.phone ILIKE $8 OR r.last_error ILIKE $8
       OR a.account ILIKE $8 OR a.name ILIKE $8 OR e.name ILIKE $8)

-- name: RecordList
SELECT r.id, r.kind, r.app_id, r.enterprise_id, r.submit_id, r.msg_id, r.phone, r.payload, r.upstream_key,
       r.status, r.prev_status, r.version, r.attempts, r.last_error, r.last_error_class, r.sender,
       r.send_token, r.send_job_id, r.send_batch_id, r.conn_id, r.seq, r.deliver_msg_id, r.ack_deadline,
       r.sent_at, r.acked_at, r.ack_result, r.history, r.created_at, r.updated_at,
       a.name, a.account, e.name
-- include: RecordFilter
ORDER BY r.id DESC
LIMIT $9 OFFSET $10;

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
-- One keyset page of eligible records ($9: statuses as a JSON array,
-- $10: after id, $11: page size).
SELECT r.id, r.app_id, r.status, r.version
-- include: RecordFilter
  AND r.status IN (SELECT jsonb_array_elements_text($9::jsonb))
  AND r.id > $10
ORDER BY r.id
LIMIT $11;

-- name: RecordInsertMany
-- Bulk ingestion ($1: JSON array of records; $2: creation time); used by
-- the load benchmark's seeding. Repeated upstream keys are skipped.
INSERT INTO dlv_record (kind, app_id, enterprise_id, submit_id, msg_id, phone, payload, upstream_key, status,
    history, created_at, updated_at)
SELECT v.kind, v.app_id, v.enterprise_id, v.submit_id, v.msg_id, v.phone, v.payload, v.upstream_key, 'pending',
       '[]', $2, $2
FROM jsonb_to_recordset($1::jsonb) AS v (kind text, app_id bigint, enterprise_id bigint, submit_id bigint,
    msg_id text, phone text, payload jsonb, upstream_key text)
ON CONFLICT (upstream_key) DO NOTHING
RETURNING id, app_id, upstream_key;

-- name: RecordClaimMany
-- RecordClaim for many attempts in one statement ($1: JSON array of
-- {id, from, version, sender, token, job_id, batch_id, conn_id, outer_id,
-- deadline, event}; $2: now). When two attempts name the same record,
-- one wins: its token is in the returned row.
UPDATE dlv_record r
SET status = 'awaiting_ack', prev_status = r.status, version = r.version + 1, attempts = r.attempts + 1,
    sender = v.sender, send_token = v.token, send_job_id = v.job_id, send_batch_id = v.batch_id,
    conn_id = v.conn_id, seq = NULL,
    deliver_msg_id = CASE WHEN r.kind = 'mo' THEN r.msg_id ELSE v.outer_id END,
    ack_deadline = v.deadline, sent_at = $2, acked_at = NULL, ack_result = NULL, updated_at = $2,
    history = r.history || jsonb_build_array(v.event)
FROM jsonb_to_recordset($1::jsonb) AS v (id bigint, "from" jsonb, version bigint, sender text, token text,
    job_id bigint, batch_id bigint, conn_id text, outer_id text, deadline timestamptz, event jsonb)
WHERE r.id = v.id
  AND r.payload IS NOT NULL AND (r.kind = 'mo' OR r.submit_id IS NOT NULL)
  AND r.status IN (SELECT jsonb_array_elements_text(v."from"))
  AND (v.version = 0 OR r.version = v.version)
RETURNING r.id, r.kind, r.app_id, r.enterprise_id, r.submit_id, r.msg_id, r.phone, r.payload, r.upstream_key, r.status,
          r.prev_status, r.version, r.attempts, r.last_error, r.last_error_class, r.sender, r.send_token, r.send_job_id,
          r.send_batch_id, r.conn_id, r.seq, r.deliver_msg_id, r.ack_deadline, r.sent_at, r.acked_at, r.ack_result,
          r.history, r.created_at, r.updated_at;
