package alarm

import (
	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

func commands(run modcli.Runner) []*cobra.Command { return nil }
