package inventory

import "github.com/keelwork/keel/module"

func (m *Module[TTx]) pages() []module.Page { return nil }
