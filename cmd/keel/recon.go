package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
)

const actionReasonHelp = "why, at least 5 characters (goes to the audit log; required)"

// remoteVerb runs a verb of group through --server, or in local mode
// against the database (cli.WithAPI serves the events and reconciliation
// routes in process; what needs a server's running code says so).
func remoteVerb(cmd *cobra.Command, group string, f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) error {
	url, schema := dbFlags(cmd)
	server, _ := cmd.Flags().GetString("server")
	asJSON, _ := cmd.Flags().GetBool("json")
	o := &cli.AdminOpts{Server: server, Token: cli.TokenFromEnv(), DatabaseURL: url, Schema: schema, JSON: asJSON,
		Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
	return cli.WithAPI(cmd.Context(), o, func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, o) })
}

func reconCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "recon",
		Short: "Reconciliation: reconcilers, runs and discrepancies; request, approve, reject and execute fixes"}
	verb := func(use, short string, args cobra.PositionalArgs, run func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, args []string) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: args, RunE: func(cmd *cobra.Command, a []string) error {
			return remoteVerb(cmd, "recon", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error { return run(ctx, c, o, a) })
		}}
	}
	reconcilers := verb("reconcilers", "List the registered reconcilers", cobra.NoArgs,
		func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, _ []string) error {
			return cli.ReconReconcilers(ctx, c, o)
		})
	var runReconciler string
	var runLimit int
	var runBefore int64
	runs := verb("runs", "List runs, newest first", cobra.NoArgs,
		func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, _ []string) error {
			return cli.ReconRuns(ctx, c, o, runReconciler, runLimit, runBefore)
		})
	runs.Flags().StringVar(&runReconciler, "reconciler", "", "only this reconciler's runs")
	runs.Flags().IntVar(&runLimit, "limit", 50, "page size (1..500)")
	runs.Flags().Int64Var(&runBefore, "before", 0, "continue before this run id (the hint a page printed)")
	run := verb("run ID", "Show a run: its cutoff, rule version, counts and totals by class and amount", cobra.ExactArgs(1),
		func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, a []string) error {
			return cli.ReconRunGet(ctx, c, o, a[0])
		})
	var cutoff string
	runNow := verb("run-now RECONCILER [--cutoff TIME]", "Run a reconciler now over everything up to the cutoff (default now; audited)",
		cobra.ExactArgs(1), func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, a []string) error {
			return cli.ReconRunNow(ctx, c, o, a[0], cutoff)
		})
	runNow.Flags().StringVar(&cutoff, "cutoff", "", "RFC 3339 cutoff; the same cutoff gives the same result")
	f := &cli.DiscrepancyFilter{}
	list := verb("list", "List discrepancies, newest first", cobra.NoArgs,
		func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, _ []string) error {
			return cli.ReconList(ctx, c, o, f)
		})
	list.Flags().StringVar(&f.Reconciler, "reconciler", "", "only this reconciler's")
	list.Flags().StringVar(&f.State, "state", "", "open, awaiting_approval, approved, executed, auto_healed, verified, rejected or resolved")
	list.Flags().StringVar(&f.Class, "class", "", "missing_ours, missing_theirs, duplicate, amount_mismatch, status_mismatch or other")
	list.Flags().StringVar(&f.Key, "key", "", "only this business key")
	list.Flags().IntVar(&f.Limit, "limit", 50, "page size (1..500)")
	list.Flags().Int64Var(&f.Before, "before", 0, "continue before this discrepancy id")
	get := verb("get ID", "Show a discrepancy with each source's evidence side by side", cobra.ExactArgs(1),
		func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, a []string) error {
			return cli.ReconGet(ctx, c, o, a[0])
		})
	cmd.AddCommand(reconcilers, runs, run, runNow, list, get)
	for action, short := range map[string]string{
		"request": "Ask a second operator to approve a discrepancy's action",
		"approve": "Approve a discrepancy's action (not your own request)",
		"reject":  "Reject a discrepancy's action (not your own request)",
		"execute": "Execute a discrepancy's action once (approved, or below the approval threshold)",
	} {
		var reason string
		c := verb(action+" ID --reason TEXT", short, cobra.ExactArgs(1),
			func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts, a []string) error {
				return cli.ReconAction(ctx, c, o, action, a[0], reason)
			})
		c.Flags().StringVar(&reason, "reason", "", actionReasonHelp)
		cmd.AddCommand(c)
	}
	return cmd
}

func approvalsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "approvals", Short: "Four-eyes approvals: list, approve, reject and execute"}
	var mine bool
	var state string
	var limit int
	var before int64
	list := &cobra.Command{Use: "list", Short: "List approval requests (--awaiting: those you may decide)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return remoteVerb(cmd, "approvals", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.ApprovalsList(ctx, c, o, mine, state, limit, before)
			})
		}}
	list.Flags().BoolVar(&mine, "awaiting", false, "only pending requests of other operators, which you may decide")
	list.Flags().StringVar(&state, "state", "", "pending, approved, rejected, executed or cancelled")
	list.Flags().IntVar(&limit, "limit", 50, "page size (1..500)")
	list.Flags().Int64Var(&before, "before", 0, "continue before this approval id")
	cmd.AddCommand(list)
	for action, short := range map[string]string{
		"approve": "Approve another operator's request",
		"reject":  "Reject another operator's request",
		"execute": "Execute an approved request once",
	} {
		var reason string
		c := &cobra.Command{Use: action + " ID --reason TEXT", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, a []string) error {
				return remoteVerb(cmd, "approvals", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
					return cli.ApprovalAction(ctx, c, o, action, a[0], reason)
				})
			}}
		c.Flags().StringVar(&reason, "reason", "", actionReasonHelp)
		cmd.AddCommand(c)
	}
	return cmd
}

func eventsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "events",
		Short: "The events backbone: outbox per topic, consumers with lag, quarantined and manual events, replay"}
	simple := func(use, short string, f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
			return remoteVerb(cmd, "events", f)
		}}
	}
	topics := simple("topics", "Outbox backlog, oldest unpublished age, publish attempts and unknown outcomes per topic", cli.EventsTopics)
	consumers := simple("consumers", "Consumers with their lag, oldest unacknowledged age, duplicates, quarantined and manual counts", cli.EventsConsumers)
	var consumer, state string
	var limit int
	var after int64
	quarantine := simple("quarantine", "Events received with a used id and another payload (never applied)",
		func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
			return cli.EventsQuarantine(ctx, c, o, consumer, limit, after)
		})
	manual := simple("manual", "Events whose handler failed past its budget", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
		return cli.EventsManual(ctx, c, o, consumer, state, limit, after)
	})
	for _, c := range []*cobra.Command{quarantine, manual} {
		c.Flags().StringVar(&consumer, "consumer", "", "only this consumer's")
		c.Flags().IntVar(&limit, "limit", 50, "page size (1..500)")
		c.Flags().Int64Var(&after, "after", 0, "continue after this id")
	}
	manual.Flags().StringVar(&state, "state", "", "manual (waiting) or replayed")
	get := &cobra.Command{Use: "get TOPIC ID", Short: "Show one event: outbox row or archive summary, and each consumer's inbox row",
		Args: cobra.ExactArgs(2), RunE: func(cmd *cobra.Command, a []string) error {
			return remoteVerb(cmd, "events", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.EventsGet(ctx, c, o, a[0], a[1])
			})
		}}
	var reason string
	replay := &cobra.Command{Use: "replay ID --reason TEXT", Short: "Run a manual event's handler again with its original event id (audited)",
		Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, a []string) error {
			return remoteVerb(cmd, "events", func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.EventsReplay(ctx, c, o, a[0], reason)
			})
		}}
	replay.Flags().StringVar(&reason, "reason", "", actionReasonHelp)
	cmd.AddCommand(topics, consumers, quarantine, manual, get, replay)
	return cmd
}
