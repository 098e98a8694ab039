package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/IBM/pgxpoolprometheus"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
)

// Serve runs `keel serve` until ctx ends, then shuts down gracefully: the
// server stops accepting and reports not ready, the client stops claiming,
// running jobs get ShutdownTimeout to finish and are then cancelled and
// handed back, and leases are released.
func Serve(ctx context.Context, o *ServeOpts, out io.Writer) error {
	return boundedRun(ctx, o.ShutdownTimeout, out, func(ctx context.Context) error {
		return withServeDatabase(ctx, o.DatabaseURL, o.Schema, func(ctx context.Context, r *serveRun) error {
			return r.run(ctx, o, out, func(s *server.Server, store *auth.Store) error {
				fmt.Fprintf(out, "keel serve: listening on %s (console %s/, API %s/api/v1/)\n", s.URL(), s.URL(), s.URL())
				if o.Ready != nil {
					o.Ready(s, store)
				}
				return nil
			})
		})
	})
}

// exitProcess ends the process when a stop overruns its bound.
var exitProcess = os.Exit

// stopBackstop is how long past its timeout a stop may take (closing
// files and connections after the shutdown's steps) before the process
// exits without waiting: a part that ignores its deadline must not make
// Ctrl-C hang.
const stopBackstop = 5 * time.Second

// boundedRun runs a server until ctx ends and bounds the stop that
// follows: a stop that arrives during startup (migrations, modules
// connecting) is a stop, not a failure, so what the cancellation made fail
// is not reported as an error; and if the run has not returned within
// timeout of ctx's end (a module or connection that ignores its context),
// the process says so and exits rather than hang (timeout 0: no bound).
func boundedRun(ctx context.Context, timeout time.Duration, out io.Writer, run func(context.Context) error) error {
	done := make(chan struct{})
	defer close(done)
	var stopAt time.Time
	var mu sync.Mutex
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		mu.Lock()
		stopAt = time.Now()
		mu.Unlock()
		if timeout <= 0 {
			return
		}
		t := time.NewTimer(timeout + stopBackstop)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			fmt.Fprintf(out, "keel: the stop did not end within %s; exiting without waiting longer\n", timeout+stopBackstop)
			exitProcess(1)
		}
	}()
	err := run(ctx)
	if err == nil || ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	mu.Lock()
	at := stopAt
	mu.Unlock()
	if at.IsZero() {
		at = time.Now()
	}
	fmt.Fprintf(out, "keel: stopped during startup in %s\n", time.Since(at).Round(10*time.Millisecond))
	return nil
}

// serveRun is what serving needs of a database, whichever driver it is.
type serveRun struct {
	run func(ctx context.Context, o *ServeOpts, out io.Writer, announce func(*server.Server, *auth.Store) error) error
}

func withServeDatabase(ctx context.Context, url, schema string, f func(context.Context, *serveRun) error) error {
	return WithDatabase(ctx, url, schema, DriverFuncs{
		Postgres: func(ctx context.Context, d *keelpgx.Driver) error {
			db := stdlib.OpenDBFromPool(d.Pool())
			defer db.Close()
			return f(ctx, &serveRun{run: func(ctx context.Context, o *ServeOpts, out io.Writer, a func(*server.Server, *auth.Store) error) error {
				return runServer(ctx, d, db, keelsql.Pgx(d.Pool()), poolMetrics(d), o, out, a)
			}})
		},
		SQLite: func(ctx context.Context, d *keelsqlite.Driver) error {
			return f(ctx, &serveRun{run: func(ctx context.Context, o *ServeOpts, out io.Writer, a func(*server.Server, *auth.Store) error) error {
				return runServer(ctx, d, d.DB(), keelsql.SQLite(d.DB()), poolMetrics(d), o, out, a)
			}})
		},
	})
}

func newLogger(out io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: l}))
}

// poolMetrics exposes the database connections' pool: how long the
// engine and the modules wait for a connection is the first thing to look
// at when work slows down, and on SQLite, where every write shares one
// connection, it is where contention shows (go_sql_wait_count_total,
// go_sql_wait_duration_seconds_total). PostgreSQL's pool is pgx's own
// (pgxpool_acquire_count, pgxpool_empty_acquire_count, ...).
func poolMetrics(d any) prometheus.Collector {
	switch d := d.(type) {
	case *keelpgx.Driver:
		return pgxpoolprometheus.NewCollector(d.Pool(), map[string]string{"db_name": "keel"})
	case *keelsqlite.Driver:
		return collectors.NewDBStatsCollector(d.DB(), "keel")
	}
	return nil
}

func runServer[TTx any](ctx context.Context, d keeldriver.Driver[TTx], db *sql.DB, mdb keelsql.DB[TTx], pool prometheus.Collector,
	o *ServeOpts, out io.Writer, announce func(*server.Server, *auth.Store) error) error {
	if o.Migrate {
		if err := migrateOn(ctx, d, &MigrateOpts{Direction: "up", Out: out}); err != nil {
			return err
		}
	}
	logger := newLogger(out, o.LogLevel)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pool != nil {
		reg.MustRegister(pool)
	}
	// Every instance signs batch previews with the key stored in the
	// database, so a preview made through one is accepted by another.
	signing, err := auth.NewStore(db, d.Dialect(), nil).SharedSecret(ctx, "batch-signing-key")
	if err != nil {
		return err
	}
	cfg := &keel.Config{Logger: logger, Registerer: reg, BatchSigningKey: signing, StopHandBack: handBackOf(o.ShutdownTimeout)}
	if o.Demo {
		addDemo(cfg, o.Queues)
	}
	events, err := newServeEvents(ctx, mdb, o, logger, reg)
	if err != nil {
		return err
	}
	defer events.close()
	host := moduleHost(mdb, logger, reg, o, events.ev)
	rc, err := attachRecon(host, logger)
	if err != nil {
		return err
	}
	mods, err := buildModules(o.Modules, host)
	if err != nil {
		return err
	}
	if err := events.ev.Configure(cfg); err != nil {
		return err
	}
	for _, m := range mods {
		if err := m.Configure(cfg); err != nil {
			return fmt.Errorf("configuring module %s: %w", m.Name(), err)
		}
	}
	if err := rc.Configure(cfg); err != nil {
		return err
	}
	client, err := keel.NewClient(d, cfg)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	// The events start before the modules, which may emit as they start,
	// and stop after them (shutdown), before the client.
	if err := events.ev.Start(ctx, client); err != nil {
		return shutdown(ctx, nil, client, nil, nil, o.ShutdownTimeout, err, out)
	}
	if err := rc.Start(ctx, client); err != nil {
		return shutdown(ctx, nil, client, nil, events.ev, o.ShutdownTimeout, err, out)
	}
	if started, err := startModules(ctx, mods, client); err != nil {
		return shutdown(ctx, nil, client, started, events.ev, o.ShutdownTimeout, err, out)
	}
	webs, err := hostedWebs(mods, rc, events.ev)
	if err != nil {
		return shutdown(ctx, nil, client, mods, events.ev, o.ShutdownTimeout, err, out)
	}
	store := auth.NewStore(db, d.Dialect(), auth.AuditedTxOf(mdb, client))
	srv, err := server.New(&server.Config{Addr: o.Addr, Engine: client, Auth: store, Gatherer: reg,
		CookieSecure: o.CookieSecure, SessionTTL: o.SessionTTL,
		SampleInterval: o.SampleInterval, Logger: logger, Modules: webs})
	if err == nil {
		err = srv.Start(ctx)
	}
	if err == nil {
		err = announce(srv, store)
		if err == nil {
			<-ctx.Done()
		}
	}
	return shutdown(ctx, srv, client, mods, events.ev, o.ShutdownTimeout, err, out)
}

// shutdown stops the HTTP server first (not ready, no new requests), then
// the modules, then the events backbone (after everything that emits or
// consumes), then the client: soft stop within timeout, hard stop (hand
// back) after.
func shutdown[TTx any](ctx context.Context, srv *server.Server, client *keel.Client[TTx], mods []module.Module[TTx],
	events stopper, timeout time.Duration, cause error, out io.Writer) error {
	start := time.Now()
	fmt.Fprintf(out, "keel: stopping (at most %s): no new requests; modules close their connections; running jobs get %s to finish, then are handed back unchanged\n",
		timeout, timeout-handBackOf(timeout))
	defer func() { fmt.Fprintf(out, "keel: stopped in %s\n", time.Since(start).Round(10*time.Millisecond)) }()
	// The soft stop gets the timeout less the hand-back's share, so a
	// stop ends within timeout in all.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout-handBackOf(timeout))
	defer cancel()
	// No new claims from here: what the modules do to stop (closing
	// customer sessions, a last presence write) would otherwise queue
	// behind them for the database, on SQLite for its one writer. Running
	// jobs go on; the client's own stop below waits for them.
	client.StopClaiming()
	if srv != nil {
		_ = srv.Shutdown(stopCtx)
	}
	// Modules stop before the client: their listeners (customer
	// connections, simulators) end, and the client hands back what they
	// leave in flight.
	if err := stopModules(stopCtx, mods); err != nil && cause == nil {
		cause = err
	}
	if events != nil {
		if err := events.Stop(stopCtx); err != nil && cause == nil {
			cause = err
		}
	}
	if err := client.Stop(stopCtx); err != nil && cause == nil {
		cause = err
	}
	return cause
}

// handBackOf is the share of the shutdown timeout kept for handing back
// jobs that did not finish: a third, at most keel's default.
func handBackOf(timeout time.Duration) time.Duration {
	return min(timeout/3, keel.DefaultStopHandBack)
}
