DROP INDEX IF EXISTS keel_job_key_running_idx;
CREATE INDEX keel_job_key_running_idx ON keel_job (flow_key) WHERE state = 'running';
