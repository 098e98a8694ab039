package inventory

func (m *Module[TTx]) registerConsumers() error { return nil }
