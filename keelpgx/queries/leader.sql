-- Statements on keel_leader.

-- name: LeaderAttemptElect
-- Takes the lease when it expired or already belongs to this leader (which
-- extends it and keeps elected_at). No row returned = someone else holds it.
INSERT INTO keel_leader (name, leader_id, elected_at, expires_at)
VALUES ($1, $2, coalesce($4::timestamptz, now()),
        coalesce($4::timestamptz, now()) + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE
SET leader_id = excluded.leader_id,
    elected_at = CASE WHEN keel_leader.leader_id = excluded.leader_id
                      THEN keel_leader.elected_at ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE keel_leader.expires_at < excluded.elected_at
   OR keel_leader.leader_id = excluded.leader_id
RETURNING leader_id;

-- name: LeaderResign
DELETE FROM keel_leader WHERE name = $1 AND leader_id = $2;

-- name: LeaderGet
SELECT name, leader_id, elected_at, expires_at FROM keel_leader WHERE name = $1;
