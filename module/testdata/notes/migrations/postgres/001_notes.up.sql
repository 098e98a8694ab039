CREATE TABLE note (
    id          bigserial PRIMARY KEY,
    body        text NOT NULL,
    due_at      timestamptz NOT NULL,
    reminded_at timestamptz
);
