package main

import (
	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
)

// moduleCmds are the installed modules' verbs, acting through --server
// with the token from KEEL_TOKEN.
func moduleCmds() []*cobra.Command {
	return cli.ModuleCommands(cli.ModuleRunner(func(cmd *cobra.Command) *cli.AdminOpts {
		url, schema := dbFlags(cmd)
		server, _ := cmd.Flags().GetString("server")
		asJSON, _ := cmd.Flags().GetBool("json")
		return &cli.AdminOpts{Server: server, Token: cli.TokenFromEnv(), DatabaseURL: url, Schema: schema, JSON: asJSON,
			Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
	}))
}
