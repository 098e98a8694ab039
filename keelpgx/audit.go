package keelpgx

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

func scanAudit(row pgx.CollectableRow) (*keeltype.AuditRow, error) {
	var a keeltype.AuditRow
	var context []byte
	if err := row.Scan(&a.ID, &a.At, &a.Actor, &a.Action, &a.Target, &a.Reason, &context); err != nil {
		return nil, err
	}
	a.At = a.At.UTC()
	a.Context = bytes.Clone(context)
	return &a, nil
}

// AuditInsert stores row (At zero = database clock, Context nil = {}) and
// returns it as stored.
func (e *executor) AuditInsert(ctx context.Context, row *keeltype.AuditRow) (*keeltype.AuditRow, error) {
	var at pgtype.Timestamptz
	if !row.At.IsZero() {
		at = pgtype.Timestamptz{Time: row.At, Valid: true}
	}
	rows, err := e.db.Query(ctx, sqlAuditInsert, at, row.Actor, row.Action, row.Target, row.Reason,
		jsonOr(row.Context, "{}"))
	if err != nil {
		return nil, fmt.Errorf("keelpgx: inserting audit row: %w", err)
	}
	stored, err := pgx.CollectExactlyOneRow(rows, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: inserting audit row: %w", err)
	}
	return stored, nil
}

// AuditList returns matching rows newest first; see AuditListParams.
func (e *executor) AuditList(ctx context.Context, p *keeldriver.AuditListParams) ([]*keeltype.AuditRow, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := e.db.Query(ctx, sqlAuditList, nullText(p.Actor), nullText(p.Action), nullText(p.Target),
		nullTime(p.Since), nullTime(p.Until), nullInt8(p.BeforeID), limit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing audit rows: %w", err)
	}
	list, err := pgx.CollectRows(rows, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: listing audit rows: %w", err)
	}
	return list, nil
}
