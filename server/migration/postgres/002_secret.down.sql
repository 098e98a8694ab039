DROP TABLE IF EXISTS keel_server_secret;
