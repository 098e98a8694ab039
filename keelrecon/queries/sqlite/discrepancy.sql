-- name: DiscrepancyColumns
id, reconciler, class, key, state, generation, evidence, suggested_action, impact, currency, safe_auto_heal,
needs_approval, first_run_id, last_run_id, verified_run_id, approval_id, action_id, executed_by, executed_at,
created_at, updated_at

-- name: DiscrepancyInsert
INSERT INTO keel_recon_discrepancy (reconciler, class, key, state, evidence, suggested_action, impact, currency,
    safe_auto_heal, needs_approval, first_run_id, last_run_id, created_at, updated_at)
VALUES (?1, ?2, ?3, 'open', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?11)
ON CONFLICT (reconciler, class, key) DO NOTHING
RETURNING id;

-- name: DiscrepancyByKey
SELECT
-- include: DiscrepancyColumns
FROM keel_recon_discrepancy WHERE reconciler = ?1 AND class = ?2 AND key = ?3;

-- name: DiscrepancyGet
SELECT
-- include: DiscrepancyColumns
FROM keel_recon_discrepancy WHERE id = ?1;

-- name: DiscrepancySeen
-- A run found the discrepancy again: its evidence is refreshed. The
-- suggested action and impact are frozen while an approval is pending or
-- given, so what is executed is what was approved.
UPDATE keel_recon_discrepancy
SET evidence = ?2, last_run_id = ?3, updated_at = ?4,
    suggested_action = CASE WHEN state IN ('awaiting_approval', 'approved') THEN suggested_action ELSE ?5 END,
    impact = CASE WHEN state IN ('awaiting_approval', 'approved') THEN impact ELSE ?6 END,
    currency = CASE WHEN state IN ('awaiting_approval', 'approved') THEN currency ELSE ?7 END,
    safe_auto_heal = CASE WHEN state IN ('awaiting_approval', 'approved') THEN safe_auto_heal ELSE ?8 END,
    needs_approval = CASE WHEN state IN ('awaiting_approval', 'approved') THEN needs_approval ELSE ?9 END
WHERE id = ?1;

-- name: DiscrepancyMove
-- A transition that changes only the state.
UPDATE keel_recon_discrepancy SET state = ?3, updated_at = ?4
WHERE id = ?1 AND state = ?2;

-- name: DiscrepancyRequest
UPDATE keel_recon_discrepancy SET state = 'awaiting_approval', approval_id = ?3, action_id = ?4, updated_at = ?5
WHERE id = ?1 AND state = 'open' AND generation = ?2;

-- name: DiscrepancyExecute
-- From open (no approval needed) or approved (the approval given for this
-- generation); the action id is fixed here, once.
UPDATE keel_recon_discrepancy
SET state = ?3, action_id = ?4, executed_by = ?5, executed_at = ?6, updated_at = ?6
WHERE id = ?1 AND state = ?2 AND generation = ?7;

-- name: DiscrepancyVerify
UPDATE keel_recon_discrepancy SET state = ?3, verified_run_id = ?4, updated_at = ?5
WHERE id = ?1 AND state = ?2;

-- name: DiscrepancyReopen
-- Found again after a fix or after it had gone: a new generation, whose
-- action gets a new action id.
UPDATE keel_recon_discrepancy
SET state = 'open', generation = generation + 1, approval_id = NULL, action_id = '', executed_by = '',
    executed_at = NULL, verified_run_id = NULL, updated_at = ?3
WHERE id = ?1 AND state = ?2;

-- name: DiscrepancyNotSeen
-- This reconciler's discrepancies a run did not find, still in a state the
-- run settles (verified, resolved and rejected-and-gone are final).
SELECT id, state, class, key FROM keel_recon_discrepancy
WHERE reconciler = ?1 AND last_run_id < ?2 AND state NOT IN ('verified', 'resolved')
ORDER BY id;

-- name: DiscrepancyList
SELECT
-- include: DiscrepancyColumns
FROM keel_recon_discrepancy
WHERE (?1 = '' OR reconciler = ?1) AND (?2 = '' OR state = ?2) AND (?3 = '' OR class = ?3)
  AND (?4 = '' OR key = ?4) AND (?5 = 0 OR id < ?5)
ORDER BY id DESC
LIMIT ?6;

-- name: DiscrepancyStateCounts
SELECT state, count(*) FROM keel_recon_discrepancy GROUP BY state;

-- name: DiscrepancyDecide
-- The approval of this generation was decided (approved or rejected).
UPDATE keel_recon_discrepancy SET state = ?3, updated_at = ?4
WHERE id = ?1 AND state = 'awaiting_approval' AND approval_id = ?2;
