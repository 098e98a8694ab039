-- Engine line, version 3 (SQLite): indexes that keep claims fast without planner
-- statistics. A full (state, queue) index let the planner, on a table that
-- was never analyzed (autovacuum off, or a freshly filled queue), prefer it
-- for claims and sort the whole backlog on every claim. Claims now have only
-- partial indexes on available rows to choose from; queue depth reads the
-- live-rows index below.
DROP INDEX IF EXISTS keel_job_state_idx;
DROP INDEX IF EXISTS keel_job_claim_idx;
CREATE INDEX keel_job_live_idx ON keel_job (queue, state) WHERE finalized_at IS NULL;
