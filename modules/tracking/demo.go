package tracking

import "context"

// demo runs the simulators and demo parcels of `keel dev`.
type demo struct{}

func (m *Module[TTx]) startDemo(ctx context.Context) error { m.demo = &demo{}; return nil }

func (d *demo) run(ctx context.Context) {}

func (d *demo) close() {}
