DROP INDEX IF EXISTS keel_job_live_idx;
CREATE INDEX IF NOT EXISTS keel_job_claim_idx ON keel_job (queue, priority, id) WHERE state = 'available';
CREATE INDEX IF NOT EXISTS keel_job_state_idx ON keel_job (state, queue);
