package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
)

func serveCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{Use: "serve", Short: "Run the engine, admin API, console and /metrics",
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := map[string]string{}
			cmd.Flags().Visit(func(f *pflagFlag) { set[f.Name] = f.Value.String() })
			cmd.InheritedFlags().Visit(func(f *pflagFlag) { set[f.Name] = f.Value.String() })
			if file == "" {
				file = os.Getenv("KEEL_CONFIG")
			}
			o, err := cli.ResolveServe(file, os.Getenv, set)
			if err != nil {
				return err
			}
			return cli.Serve(cmd.Context(), o, cmd.OutOrStdout())
		}}
	cmd.Flags().StringVar(&file, "config", "", "optional JSON settings file (env KEEL_CONFIG)")
	for _, s := range cli.ServeSettings {
		if s.Name == "database-url" || s.Name == "schema" {
			continue // the root's persistent flags
		}
		cmd.Flags().String(s.Name, s.Default, s.Help+" (env "+s.Env+")")
		if s.Default == "true" || s.Default == "false" {
			cmd.Flags().Lookup(s.Name).NoOptDefVal = "true" // --demo means --demo=true
		}
	}
	return cmd
}
