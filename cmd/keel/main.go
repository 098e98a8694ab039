// Command keel runs Keel: the engine and its modules (serve, dev), schema
// migrations (migrate) and benchmarks (bench). It only wires flags to the
// packages that do the work.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/keelbench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the stop runs within its bound; a second one
	// (Ctrl-C again) ends the process at once, as signals do by default.
	go func() { <-ctx.Done(); stop() }()
	if err := root().ExecuteContext(ctx); err != nil {
		os.Exit(exitCode(err))
	}
}

// exitCode is 1 for errors, which are printed, or the status a verb chose
// (cli.ExitError, e.g. `keel batches watch`), which has said why already.
func exitCode(err error) int {
	var exit *cli.ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	fmt.Fprintln(os.Stderr, "keel:", err)
	return 1
}

func root() *cobra.Command {
	cmd := &cobra.Command{Use: "keel", Short: "Reliable asynchronous business work", SilenceUsage: true, SilenceErrors: true}
	cmd.PersistentFlags().String("database-url", os.Getenv("KEEL_DATABASE_URL"), "postgres://… or sqlite:PATH (env KEEL_DATABASE_URL)")
	cmd.PersistentFlags().String("schema", os.Getenv("KEEL_SCHEMA"), "PostgreSQL schema for Keel's tables (env KEEL_SCHEMA)")
	cmd.PersistentFlags().String("server", os.Getenv("KEEL_SERVER"), "admin verbs: act through this server's API (token from env KEEL_TOKEN) instead of --database-url (env KEEL_SERVER)")
	cmd.PersistentFlags().Bool("json", false, "admin verbs: print JSON for scripts instead of tables")
	cmd.AddCommand(devCmd(), serveCmd(), migrateCmd(), benchCmd(), jobsCmd(), queuesCmd(), keysCmd(), auditCmd(), tokensCmd(), batchesCmd(), eventsCmd(), reconCmd(), approvalsCmd())
	cmd.AddCommand(moduleCmds()...)
	return cmd
}

func devCmd() *cobra.Command {
	var dir, addr, settings string
	var natsPort int
	cmd := &cobra.Command{Use: "dev", Short: "Run Keel on embedded SQLite with the console and demo work",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := cli.ParseModuleSettings(settings)
			if err != nil {
				return err
			}
			return cli.Dev(cmd.Context(), &cli.DevOpts{DataDir: dir, Addr: addr, Out: cmd.OutOrStdout(), ModuleSettings: ms,
				NATSPort: natsPort})
		}}
	cmd.Flags().StringVar(&dir, "data", cli.DefaultDataDir, "folder for the SQLite database")
	cmd.Flags().StringVar(&addr, "addr", cli.DefaultDevAddr, "listen address of the console and API (port 0 picks one)")
	cmd.Flags().IntVar(&natsPort, "nats-port", 0, "port of the embedded NATS JetStream server on 127.0.0.1 (0 picks a free one)")
	cmd.Flags().StringVar(&settings, "module-settings", os.Getenv("KEEL_MODULE_SETTINGS"),
		"module settings, module.key=value,… (env KEEL_MODULE_SETTINGS), e.g. delivery.cmpp_addr=127.0.0.1:7891")
	return cmd
}

func migrateCmd() *cobra.Command {
	o := &cli.MigrateOpts{}
	cmd := &cobra.Command{Use: "migrate up|down|status", Short: "Apply, revert or list schema migrations",
		Args: cobra.ExactArgs(1), ValidArgs: []string{"up", "down", "status"},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Direction, o.Out = args[0], cmd.OutOrStdout()
			url, schema := dbFlags(cmd)
			return cli.Migrate(cmd.Context(), url, schema, o)
		}}
	cmd.Flags().StringVar(&o.Line, "line", "", "migration line (default all for up, engine for down)")
	cmd.Flags().IntVar(&o.Steps, "steps", 0, "down: how many migrations to revert (default 1)")
	cmd.Flags().IntVar(&o.Target, "target", 0, "stop at this version")
	cmd.Flags().BoolVar(&o.All, "all", false, "down: revert every migration of the line")
	return cmd
}

func benchCmd() *cobra.Command {
	cfg := &keelbench.Config{}
	var claimStats, causes, startOnInsert bool
	ev := &keelbench.EventsConfig{}
	var phases, cpuProfile string
	cmd := &cobra.Command{Use: "bench", Short: "Measure throughput or latency (drain, continuous, latency, events)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Mode == "events" {
				return benchEvents(cmd, cfg, ev, phases)
			}
			cfg.DisableStartOnInsert = !startOnInsert
			if claimStats {
				cfg.ClaimStats = cmd.OutOrStdout()
			}
			if causes {
				cfg.Causes = cmd.OutOrStdout()
			}
			cfg.DatabaseURL, _ = dbFlags(cmd)
			if cfg.DatabaseURL == "" {
				cfg.DatabaseURL = "sqlite:"
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("creating the CPU profile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("starting the CPU profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			return cli.Bench(cmd.Context(), cfg, cmd.OutOrStdout())
		}}
	cmd.Flags().StringVar(&cfg.Mode, "mode", "drain", "drain, continuous, latency or events (outbox → JetStream → inbox on PostgreSQL)")
	cmd.Flags().StringVar(&ev.NATSURL, "nats-url", os.Getenv("KEEL_NATS_URL"), "events: JetStream server (default: an embedded one) (env KEEL_NATS_URL)")
	cmd.Flags().StringVar(&phases, "phases", "relay,e2e,latency,memory", "events: phases to run")
	cmd.Flags().BoolVar(&ev.Ordered, "ordered", false, "events: ordered (per-partition) consumer")
	cmd.Flags().IntVar(&ev.InboxBatch, "inbox-batch", 100, "events: deliveries per inbox transaction (1: one transaction per event)")
	cmd.Flags().IntVar(&ev.RelayLanes, "relay-lanes", 0, "events: relay publish loops (0: keelevents.DefaultRelayLanes; 1: one batch in flight)")
	cmd.Flags().IntVar(&ev.Concurrency, "concurrency", 0, "events: JetStream handler calls in flight per unordered subscription (0: the bus default)")
	cmd.Flags().IntVarP(&cfg.N, "n", "n", 100000, "drain: number of jobs")
	cmd.Flags().DurationVar(&cfg.Duration, "duration", 10*time.Second, "continuous/latency: how long")
	cmd.Flags().IntVar(&cfg.Rate, "rate", 1000, "latency: offered jobs per second")
	cmd.Flags().IntVar(&cfg.Workers, "workers", 100, "concurrent workers")
	cmd.Flags().IntVar(&cfg.FlowKeys, "flow-keys", 0, "spread jobs over this many flow keys")
	cmd.Flags().IntVar(&cfg.FinishedRows, "finished-rows", 0, "pre-fill this many completed jobs")
	cmd.Flags().BoolVar(&cfg.InsertRows, "insert-rows", false, "drain/continuous: insert with InsertMany (every stored job returned) instead of InsertManyFast (COPY on PostgreSQL)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write this process's CPU profile (go tool pprof) to this file: where the engine's own time goes")
	cmd.Flags().BoolVar(&claimStats, "claim-stats", false, "also print how many claim statements ran and their mean duration")
	cmd.Flags().BoolVar(&startOnInsert, "start-on-insert", true, "latency: start a job inserted into an idle queue on this client, claimed by its insert (the engine's default); false sets Config.DisableStartOnInsert: two commits per job")
	cmd.Flags().BoolVar(&causes, "latency-causes", false, "latency: also print the delays split by segment and what the p99 tail was made of (GC pauses, scheduler latency, database wait events)")
	return cmd
}

// benchEvents runs the events mode with -n, --rate and --duration.
func benchEvents(cmd *cobra.Command, cfg *keelbench.Config, ev *keelbench.EventsConfig, phases string) error {
	ev.DatabaseURL, _ = dbFlags(cmd)
	ev.N, ev.Rate, ev.Duration = cfg.N, cfg.Rate, cfg.Duration
	for _, p := range strings.Split(phases, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ev.Phases = append(ev.Phases, p)
		}
	}
	return cli.BenchEvents(cmd.Context(), ev, cmd.OutOrStdout())
}

func dbFlags(cmd *cobra.Command) (url, schema string) {
	url, _ = cmd.Flags().GetString("database-url")
	schema, _ = cmd.Flags().GetString("schema")
	return url, schema
}
