DROP TABLE IF EXISTS keel_flow_key;
DROP TABLE IF EXISTS keel_flow_limit;
-- The strongest lock first, so the UPDATE below does not upgrade a weaker
-- one (deadlock-prone with a concurrent migrator).
LOCK TABLE keel_job IN ACCESS EXCLUSIVE MODE;
-- Aged jobs go back to the priority they were inserted with: without
-- base_priority nothing would remember it.
UPDATE keel_job SET priority = base_priority WHERE base_priority IS NOT NULL;
ALTER TABLE keel_job DROP COLUMN IF EXISTS base_priority;
DROP INDEX IF EXISTS keel_job_key_running_idx;
DROP INDEX IF EXISTS keel_job_key_claim_idx;
