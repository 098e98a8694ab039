DROP TABLE IF EXISTS dlv_presence;
DROP TABLE IF EXISTS dlv_record;
DROP TABLE IF EXISTS dlv_submit;
DROP TABLE IF EXISTS dlv_application;
DROP TABLE IF EXISTS dlv_enterprise;
