-- Set-based bulk load for the release benchmark (BenchRelease), with
-- recursive CTEs: see the PostgreSQL file for the shape.

-- name: BenchCategory
INSERT INTO rsv_category (id, name_zh, name_en, grace_minutes, reminder_minutes, appeal_minutes, hold_minutes,
                          release_mode, updated_at, updated_by)
VALUES ('bench', '压测', 'Benchmark', 15, 0, 30, 10, 'on', ?1, 'bench')
ON CONFLICT (id) DO NOTHING;

-- name: BenchResource
INSERT INTO rsv_resource (category_id, name, created_at) VALUES ('bench', ?1, ?2) RETURNING id;

-- name: BenchSlots
WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?2)
INSERT INTO rsv_slot (resource_id, starts_at, ends_at, capacity, created_at, updated_at)
SELECT ?1, ?4 + i * 60000000, ?4 + i * 60000000 + 3600000000, ?3, ?4, ?4 FROM g;

-- name: BenchReservations
WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?2),
k AS (SELECT i, i % ?3 = 0 AS due,
             CASE WHEN i % ?3 = 0 OR i % 3 = 0 THEN 'paid' WHEN i % 3 = 1 THEN 'checked_in' ELSE 'released' END AS state
      FROM g)
INSERT INTO rsv_reservation (slot_id, resource_id, category_id, user_id, state, starts_at, ends_at,
                             grace_minutes, expected_release_at, version, created_at, updated_at, paid_at,
                             checked_in_at, released_at)
SELECT s.id, s.resource_id, 'bench', 'u' || (k.i % 50000), k.state, s.starts_at, s.ends_at, 15,
       CASE WHEN k.due THEN ?5 - (k.i % 600) * 1000000 ELSE ?5 + 86400000000 + (k.i % 600) * 1000000 END,
       2, ?5, ?5, ?5,
       CASE WHEN k.state = 'checked_in' THEN ?5 END,
       CASE WHEN k.state = 'released' THEN ?5 END
FROM k JOIN rsv_slot s ON s.resource_id = ?1 AND s.starts_at = ?6 + (k.i / ?4) * 60000000;

-- name: BenchHeld
UPDATE rsv_slot SET held = c.n
FROM (SELECT slot_id, count(*) AS n FROM rsv_reservation
      WHERE resource_id = ?1 AND state IN ('pending_payment', 'paid', 'checked_in', 'restored')
      GROUP BY slot_id) AS c
WHERE rsv_slot.id = c.slot_id;

-- name: BenchAnalyze
ANALYZE;

-- name: BenchCheckpoint
-- Moves the load out of the write-ahead log before the timed release.
PRAGMA wal_checkpoint(TRUNCATE);
