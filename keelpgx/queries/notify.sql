-- Statements of the notification path (no table).

-- name: Notify
SELECT pg_notify($1, $2);

-- name: CurrentSchema
-- Namespaces notification channels when Config.Schema is empty.
SELECT coalesce(current_schema(), '');
