package tracking

import "github.com/keelwork/keel/module"

// Routes implements module.Web.
func (m *Module[TTx]) Routes() []module.Route { return nil }

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return nil }

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem { return nil }
