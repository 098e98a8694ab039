// Command worker is one process of the multi-process limiter test: it runs
// several Keel clients (fetch loops) on one PostgreSQL schema until it gets
// SIGTERM. Each job's claim time is what the test measures; the work is nil.
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

	"github.com/jackc/pgx/v5"
	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/flowtest"
	"github.com/keelwork/keel/keelpgx"
)

func main() {
	url := flag.String("url", "", "PostgreSQL URL")
	schema := flag.String("schema", "", "schema")
	fetchers := flag.Int("fetchers", 4, "clients (fetch loops) in this process")
	flag.Parse()
	if err := run(*url, *schema, *fetchers); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(url, schema string, fetchers int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d, err := keelpgx.Open(ctx, url, &keelpgx.Config{Schema: schema})
	if err != nil {
		return err
	}
	defer d.Close()
	var clients []*keel.Client[pgx.Tx]
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
