-- Engine line, version 9: a claim of a job with a flow key writes as many
-- index entries as a claim of one without.
--
-- A claim is never a HOT update (migration 7), so its new row version gets
-- an entry in every index whose predicate it meets. Before this version a
-- keyed claim met four: the primary key, keel_job_lease_idx,
-- keel_job_key_running_idx and keel_job_flow_key_idx; an unkeyed one two.
-- Measured on a drain of 100,000 jobs over 100 keys (2 cores, PostgreSQL 15):
-- 29,600-30,900 jobs/s with them, 37,000-39,900 with this version, against
-- 45,000-46,600 without keys.
--
-- keel_job_running_idx replaces both running-job indexes. Leading with
-- flow_key, it counts a key's running jobs (what concurrency limits read) by
-- a range of the index; lease rescue, which ordered keel_job_lease_idx by
-- expiry, now reads all running rows and sorts them, and there are never
-- more of those than worker slots across instances. Jobs without a key
-- are in it with a NULL key, as they were in keel_job_lease_idx.
--
-- keel_job_flow_key_idx leaves running jobs out: a key's running jobs are
-- in keel_job_running_idx, and the statements that list or count a key's
-- jobs (JobListKey*, FlowKeyStats) read both.
--
-- CREATE INDEX takes a SHARE lock on keel_job for the build: inserts,
-- claims and completions wait for it (the running index is small; the
-- flow-key index is as large as the keyed history).
DROP INDEX IF EXISTS keel_job_lease_idx;
DROP INDEX IF EXISTS keel_job_key_running_idx;
CREATE INDEX keel_job_running_idx ON keel_job (flow_key, lease_expires_at) WHERE state = 'running';
DROP INDEX IF EXISTS keel_job_flow_key_idx;
CREATE INDEX keel_job_flow_key_idx ON keel_job (flow_key, id) WHERE flow_key IS NOT NULL AND state <> 'running';
