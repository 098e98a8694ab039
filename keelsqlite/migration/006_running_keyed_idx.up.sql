-- Engine line, version 6: the running-per-key index holds only jobs that
-- have a flow key. Running counts are read per key (flow_key = k, which
-- implies NOT NULL, so the partial index still serves them); jobs without a
-- key have no per-key limits, and indexing them cost every unkeyed claim an
-- index insertion for nothing.
DROP INDEX IF EXISTS keel_job_key_running_idx;
CREATE INDEX keel_job_key_running_idx ON keel_job (flow_key) WHERE state = 'running' AND flow_key IS NOT NULL;
