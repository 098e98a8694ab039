-- Engine line, version 5: jobs that need an operator (manual) are not
-- final, so finalized_at does not date them. The console's failure chart
-- counts them by the start of their last attempt through this index; manual
-- jobs are few, so it costs next to nothing.
CREATE INDEX keel_job_manual_idx ON keel_job (attempted_at) WHERE state = 'manual';
