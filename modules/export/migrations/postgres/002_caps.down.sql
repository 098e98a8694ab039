DROP TABLE IF EXISTS export_caps;
