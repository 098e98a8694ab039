-- Relay partitions held by leases with fences.

-- name: LeaseSeed
INSERT INTO keel_events_relay_lease (part) VALUES (?1) ON CONFLICT DO NOTHING;

-- name: LeaseList
SELECT part, owner, fence, expires_at FROM keel_events_relay_lease ORDER BY part;

-- name: LeaseAcquire
-- Takes a free or expired partition as observed at fence ?3; a racing
-- relay that observed the same fence loses.
UPDATE keel_events_relay_lease SET owner = ?2, fence = fence + 1, expires_at = ?4
WHERE part = ?1 AND fence = ?3 AND (owner = '' OR expires_at <= ?5)
RETURNING fence;

-- name: LeaseRenewMany
-- Renews every partition a relay holds in one statement (?2 parts, ?3 the
-- fence each is held at, JSON arrays of the same length): one write per
-- renewal round however many partitions, so that a busy writer connection
-- does not make the renewal itself outlast the lease. Returns the
-- partitions renewed; a missing one was taken over.
UPDATE keel_events_relay_lease SET expires_at = ?4
WHERE owner = ?1
  AND EXISTS (SELECT 1 FROM json_each(?2) AS p JOIN json_each(?3) AS f ON f.key = p.key
              WHERE p.value = keel_events_relay_lease.part AND f.value = keel_events_relay_lease.fence)
RETURNING part;

-- name: LeaseRelease
UPDATE keel_events_relay_lease SET owner = '', expires_at = ?4
WHERE part = ?1 AND owner = ?2 AND fence = ?3;

-- name: InstanceBeat
INSERT INTO keel_events_relay_instance (owner, seen_at) VALUES (?1, ?2)
ON CONFLICT (owner) DO UPDATE SET seen_at = excluded.seen_at;

-- name: InstanceCount
SELECT count(*) FROM keel_events_relay_instance WHERE seen_at > ?1;

-- name: InstancePrune
DELETE FROM keel_events_relay_instance WHERE owner = ?1 OR seen_at < ?2;
