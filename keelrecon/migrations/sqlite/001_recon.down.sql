DROP TABLE keel_approval;
DROP TABLE keel_recon_discrepancy;
DROP TABLE keel_recon_run;
