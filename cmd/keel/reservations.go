package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
)

const reservationReasonHelp = "why, at least 5 characters (goes to the audit log)"

// reservationVerb runs a reservation verb through --server: module routes
// are not served by the CLI's local mode.
func reservationVerb(cmd *cobra.Command, f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) error {
	url, schema := dbFlags(cmd)
	server, _ := cmd.Flags().GetString("server")
	asJSON, _ := cmd.Flags().GetBool("json")
	o := &cli.AdminOpts{Server: server, Token: cli.TokenFromEnv(), DatabaseURL: url, Schema: schema, JSON: asJSON,
		Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
	return cli.WithRemoteAPI(cmd.Context(), o, "reservations", func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, o) })
}

func reservationsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "reservations",
		Short: "List and act on the reservation module's reservations, slots, release runs and dead letters (through --server)"}
	cmd.AddCommand(reservationListCmd(), reservationGetCmd(), reservationActionCmd("checkin", false),
		reservationActionCmd("cancel", false), reservationActionCmd("restore", true), reservationSlotsCmd(),
		reservationRunsCmd(), reservationDeadLettersCmd(), reservationRequeueCmd())
	return cmd
}

func reservationListCmd() *cobra.Command {
	f := &cli.ReservationFilter{}
	cmd := &cobra.Command{Use: "list", Short: "List reservations, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return reservationVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ReservationsList(ctx, c, o, f)
			})
		}}
	cmd.Flags().StringVar(&f.State, "state", "", "pending_payment, paid, checked_in, released, restored, cancelled or expired")
	cmd.Flags().StringVar(&f.SlotID, "slot", "", "only this slot's reservations")
	cmd.Flags().StringVar(&f.User, "user", "", "only this user's reservations")
	cmd.Flags().IntVar(&f.Limit, "limit", 50, "page size (1..1000)")
	cmd.Flags().StringVar(&f.After, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func reservationGetCmd() *cobra.Command {
	return &cobra.Command{Use: "get ID", Short: "Show a reservation with its history and notifications", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return reservationVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ReservationGet(ctx, c, o, args[0])
			})
		}}
}

var reservationActionShort = map[string]string{
	"checkin": "Check a reservation in",
	"cancel":  "Cancel a reservation",
	"restore": "Restore a released reservation on appeal (within the appeal window; audited)",
}

func reservationActionCmd(action string, reasonRequired bool) *cobra.Command {
	var reason string
	var version int64
	use := action + " ID [--reason TEXT]"
	if reasonRequired {
		use = action + " ID --reason TEXT"
	}
	cmd := &cobra.Command{Use: use, Short: reservationActionShort[action], Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return reservationVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ReservationAction(ctx, c, o, action, args[0], reason, version)
			})
		}}
	if action == "checkin" {
		cmd.Aliases = []string{"check-in"}
	}
	help := "why (optional)"
	if reasonRequired {
		help = reservationReasonHelp + " (required)"
	}
	cmd.Flags().StringVar(&reason, "reason", "", help)
	cmd.Flags().Int64Var(&version, "version", 0, "act only if the reservation is still at this version (0: whatever it is now)")
	return cmd
}

func reservationSlotsCmd() *cobra.Command {
	f := &cli.SlotFilter{}
	cmd := &cobra.Command{Use: "slots", Short: "Show slots with their availability (capacity, held, free, waiting)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return reservationVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ReservationSlots(ctx, c, o, f)
			})
		}}
	cmd.Flags().StringVar(&f.ResourceID, "resource", "", "only this resource's slots")
	cmd.Flags().StringVar(&f.From, "from", "", "window start, RFC 3339 (default now)")
	cmd.Flags().StringVar(&f.To, "to", "", "window end, RFC 3339 (default 24 hours after the start)")
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "at most this many slots (1..1000; default the server's)")
	return cmd
}

func reservationRunsCmd() *cobra.Command {
	f := &cli.RunFilter{}
	cmd := &cobra.Command{Use: "runs", Short: "List release runs with their figures, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return reservationVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ReservationRuns(ctx, c, o, f)
			})
		}}
	cmd.Flags().StringVar(&f.Kind, "kind", "", "scan or compensation")
	cmd.Flags().IntVar(&f.Limit, "limit", 50, "page size (1..1000)")
	cmd.Flags().StringVar(&f.After, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func reservationDeadLettersCmd() *cobra.Command {
	var limit int
	var after string
	cmd := &cobra.Command{Use: "dead-letters", Short: "List reservations whose release failed past every retry", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return reservationVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ReservationDeadLetters(ctx, c, o, limit, after)
			})
		}}
	cmd.Flags().IntVar(&limit, "limit", 50, "page size (1..1000)")
	cmd.Flags().StringVar(&after, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func reservationRequeueCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "requeue ID --reason TEXT", Short: "Put a dead letter back for the next release run (audited)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return reservationVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ReservationRequeue(ctx, c, o, args[0], reason)
			})
		}}
	cmd.Flags().StringVar(&reason, "reason", "", reservationReasonHelp+" (required)")
	return cmd
}
