-- The console's home numbers and lookups (console.go). dlv_record has no
-- index on status on purpose (a push's status changes stay heap-only
-- updates), so the two status counts read the table; they run once per
-- console sampling interval, not per push.

-- name: HomeAwaitingACK
SELECT count(*) FROM dlv_record WHERE status = 'awaiting_ack';

-- name: HomeOldestWaiting
-- The record waiting longest for its delivery to conclude: updated_at is
-- when it entered pending or awaiting_ack.
SELECT updated_at FROM dlv_record WHERE status IN ('pending', 'awaiting_ack')
ORDER BY updated_at, id LIMIT 1;
