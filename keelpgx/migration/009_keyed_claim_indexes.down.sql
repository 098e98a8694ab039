DROP INDEX IF EXISTS keel_job_flow_key_idx;
CREATE INDEX keel_job_flow_key_idx ON keel_job (flow_key, id) WHERE flow_key IS NOT NULL;
DROP INDEX IF EXISTS keel_job_running_idx;
CREATE INDEX keel_job_key_running_idx ON keel_job (flow_key) WHERE state = 'running' AND flow_key IS NOT NULL;
CREATE INDEX keel_job_lease_idx ON keel_job (lease_expires_at) WHERE state = 'running';
