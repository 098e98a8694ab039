-- Statements on keel_migration and the schema catalogue.

-- name: MigrationApplied
SELECT line, version, name, applied_at FROM keel_migration ORDER BY line, version;

-- name: MigrationRecord
INSERT INTO keel_migration (line, version, name, applied_at)
VALUES (:line, :version, :name, :applied_at);

-- name: MigrationForget
DELETE FROM keel_migration WHERE line = :line AND version = :version;

-- name: TableExists
SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :name);
