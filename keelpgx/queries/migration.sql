-- Statements on keel_migration and the catalog.

-- name: TableExists
-- Only the current schema (first existing schema of search_path): a table of
-- the same name elsewhere on the path must not count as migrated.
SELECT to_regclass(quote_ident(current_schema()) || '.' || quote_ident($1)) IS NOT NULL;

-- name: MigrationApplied
SELECT line, version, name, applied_at FROM keel_migration ORDER BY line, version;

-- name: MigrationRecord
INSERT INTO keel_migration (line, version, name, applied_at)
VALUES ($1, $2, $3, coalesce($4::timestamptz, now()));

-- name: MigrationForget
DELETE FROM keel_migration WHERE line = $1 AND version = $2;
