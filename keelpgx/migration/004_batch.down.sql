DROP TRIGGER IF EXISTS keel_job_batch_delete ON keel_job;
DROP TRIGGER IF EXISTS keel_job_batch_update ON keel_job;
DROP TRIGGER IF EXISTS keel_job_batch_insert ON keel_job;
DROP FUNCTION IF EXISTS keel_batch_count_trigger();
DROP FUNCTION IF EXISTS keel_batch_bucket(text, text, jsonb);
DROP TABLE IF EXISTS keel_batch_count;
DROP TABLE IF EXISTS keel_batch;
