package inventory

import "github.com/keelwork/keel/module"

func (m *Module[TTx]) routes() []module.Route { return nil }

func (m *Module[TTx]) pages() []module.Page { return nil }
