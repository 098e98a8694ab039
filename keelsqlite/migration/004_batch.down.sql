DROP TRIGGER IF EXISTS keel_job_batch_update;
DROP TRIGGER IF EXISTS keel_job_batch_delete;
DROP TRIGGER IF EXISTS keel_job_batch_insert;
DROP TABLE IF EXISTS keel_batch_count;
DROP TABLE IF EXISTS keel_batch;
