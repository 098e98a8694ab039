package payment

import (
	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/modcli"
)

// Routes implements module.Web.
func (m *Module[TTx]) Routes() []module.Route { return nil }

// Pages implements module.Web.
func (m *Module[TTx]) Pages() []module.Page { return nil }

// Nav implements module.Web.
func (m *Module[TTx]) Nav() []module.NavItem { return nil }

// Commands are the `keel payments` verbs.
func Commands(run modcli.Runner) []*cobra.Command { return nil }
