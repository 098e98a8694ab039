package delivery

import (
	"context"
	"fmt"

	"github.com/keelwork/keel/keelsql"
)

func (s *store[TTx]) insertEnterprise(ctx context.Context, q keelsql.Querier, name string) (int64, error) {
	var id int64
	if err := q.QueryRow(ctx, s.q.Get("EnterpriseInsert"), name, now()).Scan(&id); err != nil {
		return 0, fmt.Errorf("inserting enterprise %q: %w", name, err)
	}
	return id, nil
}

func (s *store[TTx]) enterprises(ctx context.Context) ([]*Enterprise, error) {
	rows, err := s.db.Query(ctx, s.q.Get("EnterpriseList"))
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Enterprise, error) {
		e := &Enterprise{}
		return e, r.Scan(&e.ID, &e.Name, &e.CreatedAt)
	})
}

func (s *store[TTx]) insertApp(ctx context.Context, q keelsql.Querier, n *NewApplication) (int64, error) {
	status := AppEnabled
	if n.Disabled {
		status = AppDisabled
	}
	rate := n.Rate
	if rate == 0 {
		rate = DefaultAppRate
	}
	var id int64
	err := q.QueryRow(ctx, s.q.Get("AppInsert"), n.EnterpriseID, n.Name, n.Account, n.Secret, status,
		string(n.Protocol), n.ReportEnabled, n.MOEnabled, n.ReportCompat, n.PushURL, n.MOCode, rate, now()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("inserting application %q: %w", n.Name, err)
	}
	return id, nil
}

func (s *store[TTx]) apps(ctx context.Context) ([]*Application, error) {
	rows, err := s.db.Query(ctx, s.q.Get("AppList"))
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (*Application, error) {
		a := &Application{}
		return a, r.Scan(&a.ID, &a.EnterpriseID, &a.EnterpriseName, &a.Name, &a.Account, &a.Secret, &a.Status,
			&a.Protocol, &a.ReportEnabled, &a.MOEnabled, &a.ReportCompat, &a.PushURL, &a.MOCode, &a.Rate,
			&a.Version, &a.CreatedAt, &a.UpdatedAt)
	})
}

// updateApp writes the changeable settings of a, conditional on a.Version;
// it returns the new version, or ErrNoRows when a changed meanwhile.
func (s *store[TTx]) updateApp(ctx context.Context, q keelsql.Querier, a *Application) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, s.q.Get("AppUpdate"), a.ID, a.Version, a.Status, a.ReportEnabled, a.MOEnabled,
		a.ReportCompat, a.PushURL, a.Rate, now()).Scan(&v)
	return v, err
}
