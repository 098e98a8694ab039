package keelpgx

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeldriver"
)

// TableExists reports whether name is a table in the current schema.
func (e *executor) TableExists(ctx context.Context, name string) (bool, error) {
	var exists bool
	if err := e.db.QueryRow(ctx, sqlTableExists, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("keelpgx: checking table %s: %w", name, err)
	}
	return exists, nil
}

// MigrationApplied lists applied migrations by line and version; none
// before keel_migration exists. Existence is checked first rather than
// catching undefined_table, which would abort an enclosing transaction.
func (e *executor) MigrationApplied(ctx context.Context) ([]*keeldriver.MigrationRow, error) {
	exists, err := e.TableExists(ctx, "keel_migration")
	if err != nil || !exists {
		return []*keeldriver.MigrationRow{}, err
	}
	rows, err := e.db.Query(ctx, sqlMigrationApplied)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing migrations: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*keeldriver.MigrationRow, error) {
		var m keeldriver.MigrationRow
		err := row.Scan(&m.Line, &m.Version, &m.Name, &m.AppliedAt)
		m.AppliedAt = m.AppliedAt.UTC()
		return &m, err
	})
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing migrations: %w", err)
	}
	return list, nil
}

// MigrationRecord records an applied migration (AppliedAt zero = now).
func (e *executor) MigrationRecord(ctx context.Context, m *keeldriver.MigrationRow) error {
	var at pgtype.Timestamptz
	if !m.AppliedAt.IsZero() {
		at = pgtype.Timestamptz{Time: m.AppliedAt, Valid: true}
	}
	if _, err := e.db.Exec(ctx, sqlMigrationRecord, m.Line, m.Version, m.Name, at); err != nil {
		return fmt.Errorf("keelpgx: recording migration %s/%d: %w", m.Line, m.Version, err)
	}
	return nil
}

// MigrationForget removes the record of a rolled-back migration.
func (e *executor) MigrationForget(ctx context.Context, line string, version int) error {
	if _, err := e.db.Exec(ctx, sqlMigrationForget, line, version); err != nil {
		return fmt.Errorf("keelpgx: forgetting migration %s/%d: %w", line, version, err)
	}
	return nil
}
