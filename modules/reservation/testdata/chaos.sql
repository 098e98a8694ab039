-- Statements of the chaos test (PostgreSQL): find the backend serving a
-- release transaction and drop its connection.

-- name: BackendPID
SELECT pg_backend_pid();

-- name: Terminate
-- Waits (up to 10 s) until the backend has exited.
SELECT pg_terminate_backend($1, 10000);
