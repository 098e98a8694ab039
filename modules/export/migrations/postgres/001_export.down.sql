DROP TABLE IF EXISTS export_notices, export_orphans, export_quarantine, export_chunks, export_shards, export_tasks, export_grants, export_orders, export_data_version;
