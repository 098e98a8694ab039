DROP INDEX IF EXISTS keel_job_live_idx;
CREATE INDEX keel_job_live_idx ON keel_job (queue, state) WHERE finalized_at IS NULL;
CREATE INDEX keel_job_kind_idx ON keel_job (kind, id);
