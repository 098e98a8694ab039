package payment

import "context"

type demo struct{ stop func() error }

func (m *Module[TTx]) startDemo(ctx context.Context) error { return nil }

func (m *Module[TTx]) stopDemo() error {
	if m.demo == nil || m.demo.stop == nil {
		return nil
	}
	return m.demo.stop()
}
