package inventory

import "github.com/keelwork/keel/module"

// Routes implements module.Web.
func (m *Module[TTx]) Routes() []module.Route { return m.routes() }

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return m.pages() }

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem {
	return []module.NavItem{
		{Path: "/inventory", ZH: "库存", EN: "Stock"},
		{Path: "/inventory/reservations", ZH: "预占单", EN: "Reservations"},
		{Path: "/inventory/conflicts", ZH: "冲突核验", EN: "Conflicts"},
	}
}
