package export

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
)

// The module's business source is its own orders table, kept as row
// versions under one data version counter (see the migration): that is
// what makes a cut exact on both databases — PostgreSQL's exported
// snapshots have no SQLite counterpart, and a bare id cutoff would let an
// update or delete during the export leak in.

// Order is one order of the source.
type Order struct {
	Tenant      string
	OrderNo     string
	Customer    string
	AmountMinor int64
	Currency    string // ISO 4217
	Status      string
	CreatedAt   time.Time
}

// Grant gives a user a permission in a tenant.
func (m *Module[TTx]) Grant(ctx context.Context, tenant, user string, perms ...string) error {
	for _, p := range perms {
		if _, err := m.DB.Exec(ctx, m.q.Get("GrantPut"), tenant, user, p); err != nil {
			return fmt.Errorf("export: granting %s: %w", p, err)
		}
	}
	return nil
}

// Revoke takes a permission away.
func (m *Module[TTx]) Revoke(ctx context.Context, tenant, user, perm string) error {
	_, err := m.DB.Exec(ctx, m.q.Get("GrantDelete"), tenant, user, perm)
	return err
}

// Grants lists a user's permissions in a tenant.
func (m *Module[TTx]) Grants(ctx context.Context, tenant, user string) ([]string, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("GrantsOf"), tenant, user)
	out, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var s string
		return s, r.Scan(&s)
	})
	if err != nil {
		return nil, fmt.Errorf("export: reading grants: %w", err)
	}
	return out, nil
}

// DataVersion is the current data version of the source.
func (m *Module[TTx]) DataVersion(ctx context.Context) (int64, error) {
	var v int64
	err := m.DB.QueryRow(ctx, m.q.Get("VersionCurrent")).Scan(&v)
	return v, err
}

// PutOrder inserts an order (a new version), or updates it: the live
// version is closed and the new one inserted, in one transaction under a
// new data version.
func (m *Module[TTx]) PutOrder(ctx context.Context, o Order) error {
	return m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var v int64
		if err := tx.QueryRow(ctx, m.q.Get("VersionNext")).Scan(&v); err != nil {
			return fmt.Errorf("export: next data version: %w", err)
		}
		var c string
		var a int64
		var cur, st string
		var at time.Time
		err := tx.QueryRow(ctx, m.q.Get("OrderClose"), o.Tenant, o.OrderNo, v).Scan(&c, &a, &cur, &st, &at)
		if err != nil && !errors.Is(err, keelsql.ErrNoRows) {
			return fmt.Errorf("export: closing order %s: %w", o.OrderNo, err)
		}
		if o.CreatedAt.IsZero() {
			o.CreatedAt = at
		}
		var id int64
		return tx.QueryRow(ctx, m.q.Get("OrderInsert"), o.Tenant, o.OrderNo, o.Customer, o.AmountMinor, o.Currency,
			o.Status, o.CreatedAt.UTC(), v).Scan(&id)
	})
}

// DeleteOrder closes an order's live version under a new data version.
func (m *Module[TTx]) DeleteOrder(ctx context.Context, tenant, orderNo string) error {
	return m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var v int64
		if err := tx.QueryRow(ctx, m.q.Get("VersionNext")).Scan(&v); err != nil {
			return err
		}
		var c, cur, st string
		var a int64
		var at time.Time
		err := tx.QueryRow(ctx, m.q.Get("OrderClose"), tenant, orderNo, v).Scan(&c, &a, &cur, &st, &at)
		if errors.Is(err, keelsql.ErrNoRows) {
			return nil
		}
		return err
	})
}

// LiveOrders lists live order numbers of a tenant (n from offset), for
// tests and the demo.
func (m *Module[TTx]) LiveOrders(ctx context.Context, tenant string, n, offset int) ([]string, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("OrdersLiveSample"), tenant, n, offset)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var s string
		return s, r.Scan(&s)
	})
}

// Generate inserts n orders for tenant in statements of at most 100,000
// rows, each its own data version: the dataset generator for demos,
// tests and benchmarks (millions of rows in seconds on PostgreSQL).
func (m *Module[TTx]) Generate(ctx context.Context, tenant string, n int) error {
	const step = 100_000
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for done := 0; done < n; done += step {
		k := min(step, n-done)
		err := m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			var v, maxID int64
			if err := tx.QueryRow(ctx, m.q.Get("VersionNext")).Scan(&v); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, m.q.Get("OrderIDMax")).Scan(&maxID); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, m.q.Get("OrdersGenerate"), tenant, int64(k), maxID, base, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("export: generating orders: %w", err)
		}
	}
	return nil
}
