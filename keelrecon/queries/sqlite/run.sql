-- name: RunInsert
INSERT INTO keel_recon_run (reconciler, rule_version, cutoff, trigger, requested_by, started_at, instance)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
RETURNING id;

-- name: RunFinish
UPDATE keel_recon_run
SET state = ?2, finished_at = ?3, compared = ?4, found = ?5, totals = ?6, digest = ?7, applied = ?8,
    opened = ?9, healed = ?10, verified = ?11, resolved = ?12, reopened = ?13, error = ?14, scope = ?15
WHERE id = ?1 AND state = 'running';

-- name: RunColumns
id, reconciler, rule_version, cutoff, trigger, requested_by, state, started_at, finished_at, compared, found,
totals, digest, applied, opened, healed, verified, resolved, reopened, error, instance, scope

-- name: RunGet
SELECT
-- include: RunColumns
FROM keel_recon_run WHERE id = ?1;

-- name: RunList
SELECT
-- include: RunColumns
FROM keel_recon_run
WHERE (?1 = '' OR reconciler = ?1) AND (?2 = 0 OR id < ?2)
ORDER BY id DESC
LIMIT ?3;

-- name: RunLatestAppliedCutoff
-- The newest cutoff whose results were applied: a run over an older cutoff
-- (a late or concurrent one) records its figures but moves no discrepancy.
SELECT cutoff FROM keel_recon_run
WHERE reconciler = ?1 AND applied = ?2
ORDER BY cutoff DESC
LIMIT 1;

-- name: RunApplyLock
-- SQLite has one writer: the apply transaction already runs alone.
SELECT ?1 IS NOT NULL;

-- name: RunMarkApplied
UPDATE keel_recon_run SET applied = ?2 WHERE id = ?1;
