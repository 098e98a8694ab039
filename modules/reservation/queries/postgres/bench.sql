-- Set-based bulk load for the release benchmark (BenchRelease): one
-- resource of the "bench" category, slots of 10 places, reservations of
-- which every n-th is paid and past its release point; the others are
-- paid for later, checked in or released. Synthetic: release points are
-- set directly rather than derived from slot starts.

-- name: BenchCategory
INSERT INTO rsv_category (id, name_zh, name_en, grace_minutes, reminder_minutes, appeal_minutes, hold_minutes,
                          release_mode, updated_at, updated_by)
VALUES ('bench', '压测', 'Benchmark', 15, 0, 30, 10, 'on', $1, 'bench')
ON CONFLICT (id) DO NOTHING;

-- name: BenchResource
INSERT INTO rsv_resource (category_id, name, created_at) VALUES ('bench', $1, $2) RETURNING id;

-- name: BenchSlots
-- $1 resource, $2 slots, $3 capacity, $4 first start (one minute apart).
INSERT INTO rsv_slot (resource_id, starts_at, ends_at, capacity, created_at, updated_at)
SELECT $1::bigint, $4::timestamptz + g * interval '1 minute',
       $4::timestamptz + g * interval '1 minute' + interval '1 hour', $3::integer, $4::timestamptz, $4::timestamptz
FROM generate_series(0, $2::integer - 1) AS g;

-- name: BenchReservations
-- $1 resource, $2 reservations, $3 every n-th is due, $4 capacity,
-- $5 now, $6 first slot start.
INSERT INTO rsv_reservation (slot_id, resource_id, category_id, user_id, state, starts_at, ends_at,
                             grace_minutes, expected_release_at, version, created_at, updated_at, paid_at,
                             checked_in_at, released_at)
SELECT s.id, s.resource_id, 'bench', 'u' || (g % 50000),
       k.state, s.starts_at, s.ends_at, 15,
       CASE WHEN k.due THEN $5::timestamptz - (g % 600) * interval '1 second'
            ELSE $5::timestamptz + interval '1 day' + (g % 600) * interval '1 second' END,
       2, $5::timestamptz, $5::timestamptz, $5::timestamptz,
       CASE WHEN k.state = 'checked_in' THEN $5::timestamptz END,
       CASE WHEN k.state = 'released' THEN $5::timestamptz END
FROM generate_series(0, $2::integer - 1) AS g
CROSS JOIN LATERAL (SELECT g % $3::integer = 0 AS due,
                           CASE WHEN g % $3::integer = 0 OR g % 3 = 0 THEN 'paid'
                                WHEN g % 3 = 1 THEN 'checked_in' ELSE 'released' END AS state) AS k
JOIN rsv_slot s ON s.resource_id = $1::bigint
               AND s.starts_at = $6::timestamptz + (g / $4::integer) * interval '1 minute';

-- name: BenchHeld
UPDATE rsv_slot s SET held = c.n
FROM (SELECT slot_id, count(*)::integer AS n FROM rsv_reservation
      WHERE resource_id = $1 AND state IN ('pending_payment', 'paid', 'checked_in', 'restored')
      GROUP BY slot_id) c
WHERE s.id = c.slot_id;

-- name: BenchAnalyze
ANALYZE rsv_reservation, rsv_slot;

-- name: BenchCheckpoint
-- Flushes the load so that the timed release does not share the disk with
-- the checkpoint the load triggered (needs superuser or pg_checkpoint; the
-- caller ignores a refusal).
CHECKPOINT;
