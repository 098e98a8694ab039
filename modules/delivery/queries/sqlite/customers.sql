-- name: EnterpriseInsert
INSERT INTO dlv_enterprise (name, created_at) VALUES (?1, ?2) RETURNING id;

-- name: EnterpriseList
SELECT id, name, created_at FROM dlv_enterprise ORDER BY id;

-- name: AppInsert
INSERT INTO dlv_application (enterprise_id, name, account, secret, status, protocol, report_enabled,
    mo_enabled, report_compat, push_url, mo_code, rate, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)
RETURNING id;

-- name: AppList
SELECT a.id, a.enterprise_id, e.name, a.name, a.account, a.secret, a.status, a.protocol,
       a.report_enabled, a.mo_enabled, a.report_compat, a.push_url, a.mo_code, a.rate, a.version,
       a.created_at, a.updated_at
FROM dlv_application a JOIN dlv_enterprise e ON e.id = a.enterprise_id
ORDER BY a.id;

-- name: AppUpdate
-- Conditional on the version the caller read.
UPDATE dlv_application
SET status = ?3, report_enabled = ?4, mo_enabled = ?5, report_compat = ?6, push_url = ?7, rate = ?8,
    version = version + 1, updated_at = ?9
WHERE id = ?1 AND version = ?2
RETURNING version;
