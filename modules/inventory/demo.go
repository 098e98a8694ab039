package inventory

import "context"

func (m *Module[TTx]) startDemo(ctx context.Context) error { return nil }
