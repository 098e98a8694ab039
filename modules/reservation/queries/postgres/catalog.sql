-- Resources and their slots.

-- name: ResourceInsert
INSERT INTO rsv_resource (category_id, name, location, created_at)
VALUES ($1, $2, $3, $4)
RETURNING id, category_id, name, location, created_at;

-- name: ResourceList
SELECT id, category_id, name, location, created_at FROM rsv_resource ORDER BY id LIMIT $1;

-- name: SlotInsert
INSERT INTO rsv_slot (resource_id, starts_at, ends_at, capacity, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (resource_id, starts_at) DO NOTHING
RETURNING id;

-- name: SlotGet
SELECT s.id, s.resource_id, s.starts_at, s.ends_at, s.capacity, s.held, s.waiting, s.version,
       r.name, r.category_id
FROM rsv_slot s JOIN rsv_resource r ON r.id = s.resource_id
WHERE s.id = $1;

-- name: SlotList
SELECT s.id, s.resource_id, s.starts_at, s.ends_at, s.capacity, s.held, s.waiting, s.version,
       r.name, r.category_id
FROM rsv_slot s JOIN rsv_resource r ON r.id = s.resource_id
WHERE ($1::bigint = 0 OR s.resource_id = $1) AND s.ends_at > $2 AND s.starts_at < $3
ORDER BY s.starts_at, s.id
LIMIT $4;

-- name: SlotLock
-- Slots are locked in id order so that transactions returning capacity to
-- several slots never wait on each other in a cycle.
SELECT id FROM rsv_slot WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE;

-- name: SlotsRestore
-- Returns capacity: $1 lists one slot id per released reservation. The
-- slots are locked in id order first, so concurrent releases touching the
-- same slots queue instead of deadlocking. A slot holding fewer places
-- than it is asked to return is left alone and not returned, so its
-- reservations are not released.
WITH counts AS (
    SELECT slot_id, count(*)::integer AS n FROM unnest($1::bigint[]) AS slot_id GROUP BY slot_id),
locked AS (
    SELECT s.id FROM rsv_slot s WHERE s.id IN (SELECT slot_id FROM counts) ORDER BY s.id FOR UPDATE)
UPDATE rsv_slot s
SET held = s.held - c.n, version = s.version + 1, updated_at = $2
FROM counts c, locked l
WHERE s.id = c.slot_id AND l.id = s.id AND s.held >= c.n
RETURNING s.id, s.capacity, s.held, s.waiting, s.ends_at;

-- name: SlotTake
-- Takes one place of a slot that has not ended.
UPDATE rsv_slot SET held = held + 1, version = version + 1, updated_at = $2
WHERE id = $1 AND held < capacity AND ends_at > $2
RETURNING id, capacity, held;

-- name: SlotTakeForWaitlist
UPDATE rsv_slot SET held = held + 1, waiting = waiting - 1, version = version + 1, updated_at = $2
WHERE id = $1 AND held < capacity AND waiting > 0 AND ends_at > $2
RETURNING id;

-- name: SlotWaitingAdd
UPDATE rsv_slot SET waiting = waiting + $2, updated_at = $3 WHERE id = $1 AND waiting + $2 >= 0;

-- name: SlotDrift
-- Slots whose held count differs from the reservations holding them
-- ($1 = 0: every slot).
SELECT s.id, s.held, coalesce(h.n, 0)::integer
FROM rsv_slot s
LEFT JOIN (SELECT slot_id, count(*) AS n FROM rsv_reservation
           WHERE state IN ('pending_payment', 'paid', 'checked_in', 'restored')
             AND ($1::bigint = 0 OR slot_id = $1)
           GROUP BY slot_id) h ON h.slot_id = s.id
WHERE ($1::bigint = 0 OR s.id = $1) AND s.held <> coalesce(h.n, 0)
ORDER BY s.id
LIMIT $2;

-- name: SlotRepair
UPDATE rsv_slot s
SET held = (SELECT count(*) FROM rsv_reservation r WHERE r.slot_id = s.id
            AND r.state IN ('pending_payment', 'paid', 'checked_in', 'restored')),
    version = version + 1, updated_at = $2
WHERE s.id = $1
RETURNING s.held;
