-- Server line, version 2: secrets every instance must share, such as the
-- key that signs batch preview tokens (a preview made on one instance is
-- created on another). Generated once by whichever instance starts first;
-- readable only by those who can read the database, which already holds
-- every power.
CREATE TABLE keel_server_secret (
    name       TEXT   PRIMARY KEY,
    value      TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
