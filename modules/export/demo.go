package export

import (
	"context"
	"errors"

	"github.com/keelwork/keel"
)

// runDemo (keel dev): demo orders for tenant "demo", keel dev's console
// token granted, and two demo exports (CSV with BOM, XLSX) once.
func (m *Module[TTx]) runDemo(ctx context.Context) {
	var n int64
	if err := m.DB.QueryRow(ctx, "SELECT count(*) FROM export_orders WHERE tenant = 'demo'").Scan(&n); err != nil || n > 0 {
		return
	}
	if err := m.Generate(ctx, "demo", m.set.demoRows); err != nil {
		// A stop before the data is generated is not a failure: the
		// next start generates it (nothing was committed).
		if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			m.Log.Warn("export demo data", "error", err)
		}
		return
	}
	// keel dev's console signs in with the dev-admin token.
	for _, u := range []string{"token:dev-admin", "system:demo"} {
		_ = m.Grant(ctx, "demo", u, PermExport, PermAmount)
	}
	dctx := keel.WithActor(ctx, "system:demo")
	for _, r := range []Request{{Tenant: "demo", Format: "csv", BOM: true}, {Tenant: "demo", Format: "xlsx"}} {
		if _, err := m.Create(dctx, r); err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return // stopping: not a failure of the demo
			}
			m.Log.Warn("export demo task", "error", err)
		}
	}
}
