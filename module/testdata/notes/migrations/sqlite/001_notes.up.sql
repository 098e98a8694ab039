CREATE TABLE note (
    id          INTEGER PRIMARY KEY,
    body        TEXT NOT NULL,
    due_at      INTEGER NOT NULL,
    reminded_at INTEGER
);
