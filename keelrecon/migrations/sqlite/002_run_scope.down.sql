ALTER TABLE keel_recon_run DROP COLUMN scope;
