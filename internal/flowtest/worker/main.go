// Command worker is one process of the limiter test: it runs several Keel
// clients (fetch loops) on a PostgreSQL schema or a SQLite file until it gets
// SIGTERM. Each job's claim time is what the test measures; the work is nil.
// It is built without -race even when the test runs with it, so that the
// race detector's slowdown of the engine (and of modernc's pure-Go SQLite)
// does not pass for limiter imprecision.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/flowtest"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
)

func main() {
	url := flag.String("url", "", "PostgreSQL URL")
	schema := flag.String("schema", "", "PostgreSQL schema")
	sqlite := flag.String("sqlite", "", "SQLite file (instead of PostgreSQL)")
	fetchers := flag.Int("fetchers", 4, "clients (fetch loops) in this process")
	flag.Parse()
	if err := open(*url, *schema, *sqlite, *fetchers); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func open(url, schema, sqlite string, fetchers int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if sqlite != "" {
		d, err := keelsqlite.Open(sqlite, nil)
		if err != nil {
			return err
		}
		defer d.Close()
		return run(ctx, d, fetchers)
	}
	d, err := keelpgx.Open(ctx, url, &keelpgx.Config{Schema: schema})
	if err != nil {
		return err
	}
	defer d.Close()
	return run(ctx, d, fetchers)
}

func run[TTx any](ctx context.Context, d keeldriver.Driver[TTx], fetchers int) error {
	var clients []*keel.Client[TTx]
	for i := range fetchers {
		c, err := keel.NewClient(d, flowtest.ClientConfig(fmt.Sprintf("p%d-f%d", os.Getpid(), i),
			slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
		clients = append(clients, c)
	}
	fmt.Println("ready")
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range clients {
		_ = c.Stop(stopCtx)
	}
	return nil
}
