DROP TABLE IF EXISTS keel_session;
DROP TABLE IF EXISTS keel_api_token;
