-- Reverses 002_flow.up.sql. Aged jobs get their inserted priority back
-- first: without base_priority nothing would remember it. The keel_job
-- indexes go before the column because ALTER TABLE DROP COLUMN refuses a
-- column that an index (or a partial index's WHERE) uses; base_priority is
-- in none, but this order keeps the step safe whatever they become.
DROP TABLE IF EXISTS keel_flow_key;
DROP TABLE IF EXISTS keel_flow_limit;
DROP INDEX IF EXISTS keel_job_key_running_idx;
DROP INDEX IF EXISTS keel_job_key_claim_idx;
UPDATE keel_job SET priority = base_priority WHERE base_priority IS NOT NULL;
ALTER TABLE keel_job DROP COLUMN base_priority;
