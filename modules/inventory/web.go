package inventory

import "github.com/keelwork/keel/module"

// Routes implements module.Web.
func (m *Module[TTx]) Routes() []module.Route { return m.routes() }

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return m.pages() }

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem {
	return []module.NavItem{{Path: "/inventory", ZH: "库存", EN: "Inventory"}}
}
