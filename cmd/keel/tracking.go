package main

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
)

// trackingVerb runs a tracking verb through --server.
func trackingVerb(cmd *cobra.Command, f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) error {
	url, schema := dbFlags(cmd)
	server, _ := cmd.Flags().GetString("server")
	asJSON, _ := cmd.Flags().GetBool("json")
	o := &cli.AdminOpts{Server: server, Token: cli.TokenFromEnv(), DatabaseURL: url, Schema: schema, JSON: asJSON,
		Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
	return cli.WithRemoteAPI(cmd.Context(), o, "tracking", func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, o) })
}

func trackingCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tracking",
		Short: "Search waybills, show a waybill's timeline and gaps, carrier health, replay and roll out mappings (through --server)"}
	var prefix, carrier string
	var limit int
	search := &cobra.Command{Use: "search", Short: "List waybills whose number starts with --q", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return trackingVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.TrackingSearch(ctx, c, o, prefix, carrier, limit)
			})
		}}
	search.Flags().StringVar(&prefix, "q", "", "waybill number prefix")
	search.Flags().StringVar(&carrier, "carrier", "", "only this carrier")
	search.Flags().IntVar(&limit, "limit", 50, "at most this many")
	waybill := &cobra.Command{Use: "waybill CARRIER WAYBILL", Short: "Show what the customer sees, the gaps and the timeline", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return trackingVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.TrackingWaybill(ctx, c, o, args[0], args[1])
			})
		}}
	carriers := &cobra.Command{Use: "carriers", Short: "Show each carrier's shares, breakers, gaps and refused pushes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return trackingVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.TrackingCarriers(ctx, c, o)
			})
		}}
	replay := &cobra.Command{Use: "replay CARRIER VERSION", Short: "Replay a draft mapping version over history and show its diff", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, _ := strconv.Atoi(args[1])
			return trackingVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.TrackingReplay(ctx, c, o, args[0], v)
			})
		}}
	var reason string
	activate := &cobra.Command{Use: "activate CARRIER VERSION", Short: "Roll a replayed mapping version out (audited)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, _ := strconv.Atoi(args[1])
			return trackingVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.TrackingActivate(ctx, c, o, args[0], v, reason)
			})
		}}
	activate.Flags().StringVar(&reason, "reason", "", "why, at least 5 characters (goes to the audit log)")
	cmd.AddCommand(search, waybill, carriers, replay, activate)
	return cmd
}
