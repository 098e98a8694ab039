package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/server/api"
)

type pflagFlag = pflag.Flag

// admin runs an admin verb against --server or the local database.
func admin(cmd *cobra.Command, f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) error {
	url, schema := dbFlags(cmd)
	server, _ := cmd.Flags().GetString("server")
	asJSON, _ := cmd.Flags().GetBool("json")
	o := &cli.AdminOpts{Server: server, Token: cli.TokenFromEnv(), DatabaseURL: url, Schema: schema, JSON: asJSON,
		Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
	return cli.WithAPI(cmd.Context(), o, func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, o) })
}

func jobFilterFlags(cmd *cobra.Command, f *cli.JobFilter) {
	cmd.Flags().StringSliceVar(&f.States, "state", nil, "states (available, running, manual, …)")
	cmd.Flags().StringSliceVar(&f.Kinds, "kind", nil, "job kinds")
	cmd.Flags().StringSliceVar(&f.Queues, "queue", nil, "queues")
	cmd.Flags().StringVar(&f.FlowKey, "flow-key", "", "flow key")
}

func jobsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "List, inspect, cancel, retry and delete jobs"}
	f := &cli.JobFilter{}
	list := &cobra.Command{Use: "list", Short: "List jobs, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error { return cli.JobsList(ctx, c, o, f) })
		}}
	jobFilterFlags(list, f)
	list.Flags().IntVar(&f.Limit, "limit", api.DefaultLimit, "page size (1..1000)")
	list.Flags().StringVar(&f.Cursor, "after", "", "continue after a previous page (the cursor it printed)")
	get := &cobra.Command{Use: "get ID", Short: "Show a job with its attempts and errors", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.JobGet(ctx, c, o, args[0])
			})
		}}
	cmd.AddCommand(list, get, jobActionCmd("cancel"), jobRetryCmd(), jobActionCmd("delete"))
	return cmd
}

func jobActionCmd(action string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: action + " ID", Short: action + " one job (audited)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.JobAction(ctx, c, o, action, args[0], reason)
			})
		}}
	cmd.Flags().StringVar(&reason, "reason", "", "why (goes to the audit log)")
	return cmd
}

func jobRetryCmd() *cobra.Command {
	var reason string
	f := &cli.JobFilter{}
	cmd := &cobra.Command{Use: "retry [ID]", Short: "Retry one job, or every job the filters match (with a progress bar)",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				if len(args) == 1 {
					return cli.JobAction(ctx, c, o, "retry", args[0], reason)
				}
				if f.Empty() {
					return errors.New("give a job ID, or filters (--state, --kind, --queue, --flow-key) for a bulk retry")
				}
				return cli.JobsRetryAll(ctx, c, o, f, reason)
			})
		}}
	jobFilterFlags(cmd, f)
	cmd.Flags().StringVar(&reason, "reason", "", "why (goes to the audit log)")
	return cmd
}

func queuesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "List, pause and resume queues"}
	list := &cobra.Command{Use: "list", Short: "List queues with depth by state", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error { return cli.QueuesList(ctx, c, o) })
		}}
	cmd.AddCommand(list)
	for _, action := range []string{"pause", "resume"} {
		var reason string
		sub := &cobra.Command{Use: action + " NAME", Short: action + " a queue on every instance (audited)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
					return cli.QueueAction(ctx, c, o, action, args[0], reason)
				})
			}}
		sub.Flags().StringVar(&reason, "reason", "", "why (goes to the audit log)")
		cmd.AddCommand(sub)
	}
	return cmd
}

func keysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Flow keys and flow limits"}
	var prefix, cursor string
	var paused, tripped, finished bool
	var limit int
	list := &cobra.Command{Use: "list", Short: "List flow key states", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.KeysList(ctx, c, o, prefix, paused, tripped, finished, limit, cursor)
			})
		}}
	list.Flags().StringVar(&prefix, "prefix", "", "only keys starting with this")
	list.Flags().BoolVar(&paused, "paused", false, "only paused keys")
	list.Flags().BoolVar(&tripped, "tripped", false, "only keys whose breaker is not closed")
	list.Flags().BoolVar(&finished, "finished", false, "also the keys of finished batches (left out by default)")
	list.Flags().IntVar(&limit, "limit", api.DefaultLimit, "page size (1..1000)")
	list.Flags().StringVar(&cursor, "after", "", "continue after a previous page (the cursor it printed)")
	get := &cobra.Command{Use: "get KEY", Short: "Show one key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.KeyGet(ctx, c, o, args[0])
			})
		}}
	cmd.AddCommand(list, get, limitsCmd(), setLimitCmd(), deleteLimitCmd())
	for _, action := range []string{"pause", "resume", "close-breaker"} {
		var reason string
		sub := &cobra.Command{Use: action + " KEY", Short: action + " a flow key (audited)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
					return cli.KeyAction(ctx, c, o, action, args[0], reason)
				})
			}}
		sub.Flags().StringVar(&reason, "reason", "", "why (goes to the audit log)")
		cmd.AddCommand(sub)
	}
	return cmd
}

func limitsCmd() *cobra.Command {
	return &cobra.Command{Use: "limits", Short: "List flow limits", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error { return cli.LimitsList(ctx, c, o) })
		}}
}

func setLimitCmd() *cobra.Command {
	l := &api.FlowLimit{}
	cmd := &cobra.Command{Use: "set-limit", Short: "Create or replace a flow limit (admin, audited)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error { return cli.LimitSet(ctx, c, o, l) })
		}}
	fl := cmd.Flags()
	fl.StringVar(&l.Pattern, "pattern", "", "key, prefix ending in '*', or '*'")
	fl.StringVar(&l.Queue, "queue", "", "only claims from this queue")
	fl.Float64Var(&l.Rate, "rate", 0, "claims per second per key")
	fl.IntVar(&l.Burst, "burst", 0, "burst above the steady rate")
	fl.IntVar(&l.MaxRunning, "max-running", 0, "running jobs per key")
	fl.IntVar(&l.BreakerFailures, "breaker-failures", 0, "open the breaker after this many consecutive failures")
	fl.StringVar(&l.BreakerCooldown, "breaker-cooldown", "", "how long the breaker stays open (e.g. 30s)")
	fl.IntVar(&l.AutoPauseFailures, "autopause-failures", 0, "pause the key after this many consecutive failures")
	fl.IntVar(&l.Weight, "weight", 0, "share among keys with backlog")
	fl.StringVar(&l.Reason, "reason", "", "why (goes to the audit log)")
	_ = cmd.MarkFlagRequired("pattern")
	return cmd
}

func deleteLimitCmd() *cobra.Command {
	var pattern, queue, reason string
	cmd := &cobra.Command{Use: "delete-limit", Short: "Delete a flow limit (admin, audited)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.LimitDelete(ctx, c, o, pattern, queue, reason)
			})
		}}
	cmd.Flags().StringVar(&pattern, "pattern", "", "the limit's pattern")
	cmd.Flags().StringVar(&queue, "queue", "", "the limit's queue")
	cmd.Flags().StringVar(&reason, "reason", "", "why (goes to the audit log)")
	_ = cmd.MarkFlagRequired("pattern")
	return cmd
}

func auditCmd() *cobra.Command {
	var actor, action, target, cursor string
	var limit int
	cmd := &cobra.Command{Use: "audit", Short: "Read the audit log, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.AuditList(ctx, c, o, actor, action, target, limit, cursor)
			})
		}}
	cmd.Flags().StringVar(&actor, "actor", "", "only this actor (token:ci, cli:alice, system)")
	cmd.Flags().StringVar(&action, "action", "", "action prefix (queue., job.retry)")
	cmd.Flags().StringVar(&target, "target", "", "only this target (job:42, queue:default)")
	cmd.Flags().IntVar(&limit, "limit", api.DefaultLimit, "page size (1..1000)")
	cmd.Flags().StringVar(&cursor, "after", "", "continue after a previous page (the cursor it printed)")
	return cmd
}

func tokensCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tokens", Short: "Create, list and revoke API tokens (admin)"}
	var name, role, reason string
	create := &cobra.Command{Use: "create", Short: "Create a token; its secret is printed once", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.TokensCreate(ctx, c, o, name, role)
			})
		}}
	create.Flags().StringVar(&name, "name", "", "a name for the token (audited as token:NAME)")
	create.Flags().StringVar(&role, "role", "viewer", "viewer, operator or admin")
	_ = create.MarkFlagRequired("name")
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a token and end its console sessions", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.TokensRevoke(ctx, c, o, args[0], reason)
			})
		}}
	revoke.Flags().StringVar(&reason, "reason", "", "why (goes to the audit log)")
	list := &cobra.Command{Use: "list", Short: "List tokens (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error { return cli.TokensList(ctx, c, o) })
		}}
	cmd.AddCommand(create, revoke, list)
	return cmd
}
