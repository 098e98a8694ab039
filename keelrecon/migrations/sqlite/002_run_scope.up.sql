-- A partial run (an intraday incremental one) compares only part of the
-- data and says which in words; it settles only the discrepancies within
-- its scope. Empty: the run was complete.
ALTER TABLE keel_recon_run ADD COLUMN scope TEXT NOT NULL DEFAULT '';
