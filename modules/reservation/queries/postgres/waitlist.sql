-- The waitlist of a full slot.

-- name: WaitlistInsert
INSERT INTO rsv_waitlist (slot_id, user_id, created_at, updated_at)
VALUES ($1, $2, $3, $3)
ON CONFLICT (slot_id, user_id) WHERE state = 'waiting' DO NOTHING
RETURNING id;

-- name: WaitlistNext
SELECT id, user_id FROM rsv_waitlist
WHERE slot_id = $1 AND state = 'waiting'
ORDER BY id
LIMIT $2
FOR UPDATE SKIP LOCKED;

-- name: WaitlistOffer
-- By primary key: with "state = 'waiting'" and statistics taken while no
-- one waited, the plan walked every entry of rsv_waitlist_user_key for
-- this one id.
UPDATE rsv_waitlist SET state = 'offered', reservation_id = $2, updated_at = $3
WHERE id = $1 AND (state = 'waiting') IS TRUE;

-- name: WaitlistList
SELECT id, slot_id, user_id, state, coalesce(reservation_id, 0), created_at, updated_at
FROM rsv_waitlist WHERE slot_id = $1 ORDER BY id LIMIT $2;

-- name: SlotHoldMinutes
-- The waitlist-offer hold of a slot's category.
SELECT c.hold_minutes FROM rsv_slot s
JOIN rsv_resource r ON r.id = s.resource_id
JOIN rsv_category c ON c.id = r.category_id
WHERE s.id = $1;
