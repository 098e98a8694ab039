package payment

import (
	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

// Commands are the `keel payments` verbs.
func Commands(run modcli.Runner) []*cobra.Command { return nil }
