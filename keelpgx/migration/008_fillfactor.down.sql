ALTER TABLE keel_job RESET (fillfactor);
