package export

import (
	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

// Commands are the module's verbs under `keel exports` (commands_cli.go).
func Commands(run modcli.Runner) []*cobra.Command {
	return []*cobra.Command{modcli.Group("exports",
		"Create, watch, cancel, retry and download exports (through --server)",
		createCmd(run), listCmd(run), showCmd(run), cancelCmd(run, "cancel"), cancelCmd(run, "retry"), downloadCmd(run))}
}
