-- Statements on keel_leader.

-- name: LeaderAttemptElect
-- Takes the lease when it is free or expired, extends it when already held
-- (keeping elected_at); returns no row when someone else holds it.
INSERT INTO keel_leader (name, leader_id, elected_at, expires_at)
VALUES (:name, :leader_id, :now, :expires_at)
ON CONFLICT (name) DO UPDATE SET
    elected_at = CASE WHEN keel_leader.leader_id = excluded.leader_id
        THEN keel_leader.elected_at ELSE excluded.elected_at END,
    leader_id = excluded.leader_id,
    expires_at = excluded.expires_at
WHERE keel_leader.leader_id = excluded.leader_id OR keel_leader.expires_at < excluded.elected_at
RETURNING leader_id;

-- name: LeaderResign
DELETE FROM keel_leader WHERE name = :name AND leader_id = :leader_id;

-- name: LeaderGet
SELECT name, leader_id, elected_at, expires_at FROM keel_leader WHERE name = :name;
