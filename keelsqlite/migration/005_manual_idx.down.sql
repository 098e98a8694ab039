DROP INDEX IF EXISTS keel_job_manual_idx;
