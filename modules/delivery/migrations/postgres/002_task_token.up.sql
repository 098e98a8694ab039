-- Delivery line, version 2 (PostgreSQL): a preview token creates at most one
-- requeue task. The token's SHA-256 is claimed by the primary key before the
-- task is created, so two posts of one token (even at once) cannot both
-- create: the second finds the claim and answers with the first task.
CREATE TABLE dlv_task_token (
    digest     text        PRIMARY KEY CHECK (char_length(digest) = 64),
    operator   text        NOT NULL,
    batch_id   bigint,
    created_at timestamptz NOT NULL
);
