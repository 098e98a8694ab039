// Command bench compares Keel with peer job queues (River) on the same
// PostgreSQL database, in the same run, with the same shape of work, and
// prints Keel/River ratios. It is its own module so that the main Keel
// module never depends on River.
//
//	cd bench && go run . --database-url URL --mode drain -n 100000 --workers 100 --rounds 3
//
// Each round runs Keel (through keelbench, the code behind `keel bench`) and
// River, each in a fresh schema that is dropped afterwards, alternating
// which goes first. docs/benchmarks.md describes the method and results.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/keelwork/keel/keelsql"
)

const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

type options struct {
	runConfig
	Modes         []string
	Rounds        int
	RiverDefaults bool
	Only          string // "" (both), "keel" or "river": one engine, no ratios
	River         riverTuning
	Verbose       bool
	NATSURL       string // events: the JetStream server both sides publish to
	KeelCauses    bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil {
		if opts.KeelCauses {
			opts.Causes = os.Stdout
		}
		err = run(ctx, opts, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func envURL() string {
	for _, k := range []string{"KEEL_DATABASE_URL", "KEEL_TEST_DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return defaultDatabaseURL
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var modes string
	fs.StringVar(&o.DatabaseURL, "database-url", envURL(), "PostgreSQL URL (default $KEEL_DATABASE_URL, then $KEEL_TEST_DATABASE_URL); each run uses a fresh schema in it")
	fs.StringVar(&modes, "mode", "drain", "drain, continuous, latency or sqlite-drain (both engines on a fresh SQLite file each); a comma-separated list runs each in turn; or events (Keel's relay against Watermill's SQL outbox forwarder, to JetStream)")
	fs.StringVar(&o.NATSURL, "nats-url", defaultNATSURL(), "events: JetStream server (default $KEEL_NATS_URL, then $KEEL_TEST_NATS_URL, then nats://127.0.0.1:4222)")
	fs.IntVar(&o.N, "n", 100000, "drain: jobs inserted up front, then worked down (the timed part)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "continuous and latency: how long to run")
	fs.IntVar(&o.Rate, "rate", 1000, "latency: offered jobs/s, one insert per job")
	fs.IntVar(&o.Workers, "workers", 100, "concurrent workers (MaxWorkers of the one queue) for both engines")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds per mode; each runs both engines, alternating which goes first")
	fs.BoolVar(&o.RiverDefaults, "river-defaults", true, "also run River once per mode with its default FetchCooldown/FetchPollInterval (labelled)")
	fs.DurationVar(&o.River.FetchCooldown, "river-fetch-cooldown", riverTuned.FetchCooldown, "River's FetchCooldown in the compared runs (River's default is 100ms)")
	fs.DurationVar(&o.River.FetchPollInterval, "river-fetch-poll-interval", riverTuned.FetchPollInterval, "River's FetchPollInterval in the compared runs (River's default is 1s)")
	fs.StringVar(&o.Only, "only", "", "run just keel or just river (for profiling one side; prints no ratios)")
	fs.BoolVar(&o.KeelCauses, "keel-causes", false, "latency: after each Keel run, print its delays split by segment (insert, claim wait, claim and start), what the jobs at or above p99 were made of, GC pauses, Go scheduler latency and a sample of the database's wait events")
	fs.BoolVar(&o.KeelStartOnInsert, "keel-start-on-insert", true, "latency: Keel starts a job inserted into an idle queue on the inserting client, claimed by its insert (its default; false sets Config.DisableStartOnInsert: two commits per job)")
	fs.BoolVar(&o.KeelInsertRows, "keel-insert-rows", false, "drain and continuous: Keel inserts with InsertMany, which returns every stored job, instead of InsertManyFast (COPY, as River's InsertManyFast)")
	fs.BoolVar(&o.Verbose, "v", false, "log the engines' messages (warnings and up) to stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for m := range strings.SplitSeq(modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "drain", "continuous", "latency", "events", sqliteDrain:
			o.Modes = append(o.Modes, m)
		default:
			return nil, fmt.Errorf("--mode %q is not drain, continuous, latency, sqlite-drain or events", m)
		}
	}
	if err := validEventsMode(o.Modes); err != nil {
		return nil, err
	}
	switch {
	case o.Only != "" && o.Only != "keel" && o.Only != "river" && o.Only != "watermill":
		return nil, fmt.Errorf("--only %q is not keel, river or watermill", o.Only)
	case o.Rounds < 1:
		return nil, errors.New("--rounds must be ≥ 1")
	case o.Workers < 1:
		return nil, errors.New("--workers must be ≥ 1")
	case o.N < 1:
		return nil, errors.New("-n must be ≥ 1")
	case o.Duration <= 0:
		return nil, errors.New("--duration must be positive")
	case o.Rate < 1:
		return nil, errors.New("--rate must be ≥ 1")
	case o.River.FetchCooldown < river.FetchCooldownMin || o.River.FetchPollInterval < o.River.FetchCooldown:
		return nil, fmt.Errorf("River needs FetchCooldown ≥ %s and FetchPollInterval ≥ FetchCooldown", river.FetchCooldownMin)
	}
	if o.Verbose {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return o, nil
}

// engine is one side of a round.
type engine struct {
	name string
	run  func(context.Context, *runConfig) (*Result, error)
}

func engines(mode string, t riverTuning) (keel, river engine) {
	if mode == sqliteDrain {
		return engine{"keel", runKeelSQLite},
			engine{"river", func(ctx context.Context, c *runConfig) (*Result, error) { return runRiverSQLite(ctx, c, t) }}
	}
	return engine{"keel", runKeel},
		engine{"river", func(ctx context.Context, c *runConfig) (*Result, error) { return runRiver(ctx, c, t) }}
}

// modeSummary is what the rounds of one mode measured.
type modeSummary struct {
	Mode         string
	Peer         string // "" for River; the River fields hold the peer's results
	Keel, River  []*Result
	RiverDefault *Result // nil unless --river-defaults
}

func run(ctx context.Context, o *options, out io.Writer) error {
	keelCfg := "defaults"
	if !o.KeelStartOnInsert {
		keelCfg = "DisableStartOnInsert"
	}
	fmt.Fprintf(out, "peers: %s; workers %d, rounds %d; keel %s; river %s\n", describeDB(ctx, o.DatabaseURL), o.Workers, o.Rounds, keelCfg, o.River)
	var sums []*modeSummary
	for _, mode := range o.Modes {
		cfg := o.runConfig
		cfg.Mode = mode
		if mode == "events" {
			s, err := runEventsMode(ctx, &cfg, o, out)
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			if s != nil {
				sums = append(sums, s)
			}
			continue
		}
		if o.Only != "" {
			if err := runOnly(ctx, &cfg, o, out); err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			continue
		}
		s, err := runMode(ctx, &cfg, o, out)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		sums = append(sums, s)
	}
	for _, s := range sums {
		fmt.Fprintln(out, s.summary())
	}
	writeTable(out, sums)
	return nil
}

// runOnly runs one engine's rounds of one mode.
func runOnly(ctx context.Context, cfg *runConfig, o *options, out io.Writer) error {
	keel, river := engines(cfg.Mode, o.River)
	e, rounds := keel, o.Rounds
	if o.Only == "river" {
		e = river
	}
	for round := 1; round <= rounds; round++ {
		checkpoint(ctx, cfg.DatabaseURL)
		r, err := e.run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("round %d, %s: %w", round, e.name, err)
		}
		fmt.Fprintf(out, "round %d/%d %-5s %s\n", round, rounds, e.name, r)
	}
	return nil
}

// runMode runs the rounds of one mode, printing each figure as it comes.
func runMode(ctx context.Context, cfg *runConfig, o *options, out io.Writer) (*modeSummary, error) {
	keel, river := engines(cfg.Mode, o.River)
	rounds := o.Rounds
	s := &modeSummary{Mode: cfg.Mode}
	for round := 1; round <= rounds; round++ {
		order := []engine{keel, river}
		if round%2 == 0 {
			order = []engine{river, keel}
		}
		for _, e := range order {
			checkpoint(ctx, cfg.DatabaseURL)
			r, err := e.run(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round, e.name, err)
			}
			fmt.Fprintf(out, "round %d/%d %-5s %s\n", round, rounds, e.name, r)
			if e.name == "keel" {
				s.Keel = append(s.Keel, r)
			} else {
				s.River = append(s.River, r)
			}
		}
		fmt.Fprintf(out, "round %d/%d ratio %s%s\n", round, rounds, ratioText(s.Keel[round-1], s.River[round-1]), loadText())
	}
	if o.RiverDefaults {
		checkpoint(ctx, cfg.DatabaseURL)
		_, defaults := engines(cfg.Mode, riverTuning{})
		r, err := defaults.run(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("river with defaults: %w", err)
		}
		fmt.Fprintf(out, "river (%s) %s\n", riverTuning{}, r)
		s.RiverDefault = r
	}
	return s, nil
}

// ratioText is keel/river for one round: jobs/s (higher is better) or, for
// latency, p50 and p99 delay (lower is better).
func ratioText(k, r *Result) string {
	if k.Mode == "latency" {
		return fmt.Sprintf("keel/river p50 %.2fx, p99 %.2fx (lower is better)", durRatio(k.P50, r.P50), durRatio(k.P99, r.P99))
	}
	return fmt.Sprintf("keel/river %.2fx", k.JobsPerSec/r.JobsPerSec)
}

func durRatio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// summary is the closing line of one mode: medians over the rounds, and the
// median of the per-round ratios.
func (s *modeSummary) summary() string {
	n := len(s.Keel)
	pick := func(rs []*Result, f func(*Result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	ratios := func(f func(k, r *Result) float64) float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = f(s.Keel[i], s.River[i])
		}
		return median(xs)
	}
	if s.Mode == "latency" {
		ms := func(f func(*Result) time.Duration) func(*Result) float64 {
			return func(r *Result) float64 { return float64(f(r)) / float64(time.Millisecond) }
		}
		p50 := func(r *Result) time.Duration { return r.P50 }
		p99 := func(r *Result) time.Duration { return r.P99 }
		line := fmt.Sprintf("peers: latency at %d jobs/s keel p50 %.2fms p99 %.2fms, river p50 %.2fms p99 %.2fms, keel/river p50 %.2fx p99 %.2fx (median of %d; lower is better)",
			int(pick(s.Keel, func(r *Result) float64 { return r.JobsPerSec })+0.5),
			pick(s.Keel, ms(p50)), pick(s.Keel, ms(p99)), pick(s.River, ms(p50)), pick(s.River, ms(p99)),
			ratios(func(k, r *Result) float64 { return durRatio(k.P50, r.P50) }),
			ratios(func(k, r *Result) float64 { return durRatio(k.P99, r.P99) }), n)
		if d := s.RiverDefault; d != nil {
			line += fmt.Sprintf("\npeers: latency river (defaults) p50 %.2fms p99 %.2fms (one run)", ms(p50)(d), ms(p99)(d))
		}
		return line
	}
	jps := func(r *Result) float64 { return r.JobsPerSec }
	if s.Peer != "" {
		return fmt.Sprintf("peers: %s relay keel %.0f events/s, %s %.0f events/s, ratio %.2fx (median of %d)",
			s.Mode, pick(s.Keel, jps), s.Peer, pick(s.River, jps), ratios(func(k, r *Result) float64 { return k.JobsPerSec / r.JobsPerSec }), n)
	}
	line := fmt.Sprintf("peers: %s keel %.0f jobs/s, river %.0f jobs/s, ratio %.2fx (median of %d)",
		s.Mode, pick(s.Keel, jps), pick(s.River, jps), ratios(func(k, r *Result) float64 { return k.JobsPerSec / r.JobsPerSec }), n)
	if d := s.RiverDefault; d != nil {
		line += fmt.Sprintf("\npeers: %s river (defaults) %.0f jobs/s, keel/river-defaults %.2fx (one run)", s.Mode, d.JobsPerSec, pick(s.Keel, jps)/d.JobsPerSec)
	}
	return line
}

// checkpoint asks PostgreSQL for a CHECKPOINT before a timed run, so that one
// run's dirty pages (and the previous run's dropped schema) are not flushed
// during the next. It needs superuser or pg_checkpoint; failing is harmless.
func checkpoint(ctx context.Context, url string) {
	conn, err := pgx.Connect(ctx, keelsql.SingleConnURL(url))
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, _ = conn.Exec(ctx, "CHECKPOINT")
}

// describeDB names the server version and the settings that matter most
// for a durable queue.
func describeDB(ctx context.Context, url string) string {
	conn, err := pgx.Connect(ctx, keelsql.SingleConnURL(url))
	if err != nil {
		return "database unreachable: " + err.Error()
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version, syncCommit, fsync string
	err = conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('synchronous_commit'), current_setting('fsync')").
		Scan(&version, &syncCommit, &fsync)
	if err != nil {
		return "database settings unreadable: " + err.Error()
	}
	return fmt.Sprintf("PostgreSQL %s (synchronous_commit %s, fsync %s)", version, syncCommit, fsync)
}

// loadText is the machine's load averages (1, 5, 15 minutes) for a round's
// line, so a figure says what else was running beside it; empty where
// /proc/loadavg does not exist.
func loadText() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return "; load average " + strings.Join(f[:3], " ")
}
