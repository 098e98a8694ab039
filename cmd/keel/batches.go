package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/server/api"
)

const reasonHelp = "why, at least 5 characters (required; goes to the audit log)"

func batchesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "batches", Short: "List, inspect, pause, resume, terminate and watch batches (bulk tasks)"}
	cmd.AddCommand(batchListCmd(), batchGetCmd(), batchItemsCmd(), batchActionCmd("pause"), batchActionCmd("resume"),
		batchActionCmd("terminate"), batchKeyResumeCmd(), batchWatchCmd())
	return cmd
}

func batchListCmd() *cobra.Command {
	f := &cli.BatchFilter{}
	cmd := &cobra.Command{Use: "list", Short: "List batches, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.BatchesList(ctx, c, o, f)
			})
		}}
	cmd.Flags().StringSliceVar(&f.States, "state", nil, "states (queued, running, paused, completed, partial_completed, terminated)")
	cmd.Flags().StringVar(&f.Kind, "kind", "", "batch kind")
	cmd.Flags().IntVar(&f.Limit, "limit", api.DefaultLimit, "page size (1..1000)")
	cmd.Flags().StringVar(&f.After, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func batchGetCmd() *cobra.Command {
	return &cobra.Command{Use: "get ID", Short: "Show a batch: counters per item outcome, skip reasons, paused keys",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.BatchGet(ctx, c, o, args[0])
			})
		}}
}

func batchItemsCmd() *cobra.Command {
	f := &cli.ItemFilter{}
	cmd := &cobra.Command{Use: "items ID", Short: "List a batch's items in subject order", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.BatchItems(ctx, c, o, args[0], f)
			})
		}}
	cmd.Flags().StringVar(&f.Outcome, "outcome", "", "success, failed, skipped, waiting_connection, waiting_external_ack, waiting_ack, waiting, processing, queued or unprocessed")
	cmd.Flags().StringVar(&f.Key, "key", "", "only the item with this subject (its record's key in the module)")
	cmd.Flags().StringVar(&f.Text, "text", "", "only items whose wait reason, result or errors contain this")
	cmd.Flags().IntVar(&f.Limit, "limit", api.DefaultLimit, "page size (1..1000)")
	cmd.Flags().StringVar(&f.After, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func batchActionCmd(action string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: action + " ID --reason TEXT", Short: action + " a batch (audited)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.BatchAction(ctx, c, o, action, args[0], reason)
			})
		}}
	cmd.Flags().StringVar(&reason, "reason", "", reasonHelp)
	return cmd
}

func batchKeyResumeCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "resume-key ID KEY --reason TEXT", Short: "Resume one paused flow key of a batch (KEY as the module names it, e.g. app:42; audited)",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.BatchKeyResume(ctx, c, o, args[0], args[1], reason)
			})
		}}
	cmd.Flags().StringVar(&reason, "reason", "", reasonHelp)
	return cmd
}

const watchHelp = `Redraws the batch's progress on one line (done/total, rate, failed, skipped
and waiting items) until it reaches a final state, then prints a summary.
With --json, prints the batch as one JSON line whenever it changed.

Exit status:
  0    the batch completed (every item ended, none failed)
  3    the batch partially completed (some items failed)
  4    the batch was terminated
  130  Ctrl-C stopped the watching; the batch itself is not touched
  1    any other error (e.g. no such batch)`

func batchWatchCmd() *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{Use: "watch ID", Short: "Follow a batch until it ends (exit 0 completed, 3 partially completed, 4 terminated)",
		Long: watchHelp, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.BatchWatch(ctx, c, o, args[0], interval)
			})
		}}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to read the batch")
	return cmd
}
