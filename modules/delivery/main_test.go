package delivery

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/module"
)

// helperEnv selects a helper main when the test binary re-executes itself
// as a child process (see TestDRQ009): "instance" runs one Keel instance
// with the delivery module until it is killed.
const helperEnv = "DELIVERY_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "instance" {
		if err := helperInstance(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperInstance runs a Keel instance on the database named by the
// environment (a PostgreSQL schema, or a SQLite file when
// DELIVERY_HELPER_SQLITE is set); it prints "ready <gateway address>" once
// it serves, and runs until SIGKILL (or SIGTERM, a clean stop).
func helperInstance() error {
	ctx := context.Background()
	if path := os.Getenv("DELIVERY_HELPER_SQLITE"); path != "" {
		d, err := keelsqlite.Open(path, nil)
		if err != nil {
			return err
		}
		defer d.Close()
		return runHelperInstance(ctx, d, keelsql.SQLite(d.DB()))
	}
	d, err := keelpgx.Open(ctx, os.Getenv("DELIVERY_HELPER_URL"), &keelpgx.Config{Schema: os.Getenv("DELIVERY_HELPER_SCHEMA")})
	if err != nil {
		return err
	}
	defer d.Close()
	return runHelperInstance(ctx, d, keelsql.Pgx(d.Pool()))
}

func runHelperInstance[TTx any](ctx context.Context, d keeldriver.Driver[TTx], db keelsql.DB[TTx]) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	settings := testSettings("instance", os.Getenv("DELIVERY_HELPER_INSTANCE"), "window", "2",
		"ack_timeout", "3s", "ack_inline", "300ms")
	// DELIVERY_HELPER_SETTINGS overrides: "name=value,name=value".
	for _, kv := range strings.Split(os.Getenv("DELIVERY_HELPER_SETTINGS"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			settings["delivery."+k] = v
		}
	}
	cfg := engineConfig()
	if db.Dialect() == "sqlite" {
		settings = sqliteSettings(settings)
		sqliteConfig(cfg)
	}
	m, err := New(&module.Host[TTx]{DB: db, Logger: logger, Settings: settings})
	if err != nil {
		return err
	}
	cfg.Logger, cfg.LeaseDuration = logger, 2*time.Second
	if err := m.Configure(cfg); err != nil {
		return err
	}
	c, err := keel.NewClient(d, cfg)
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	if err := m.Start(ctx, c); err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "ready %s\n", m.Addr())
	if err := w.Flush(); err != nil {
		return err
	}
	<-sigs
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = m.Stop(stop)
	return c.StopAndCancel(stop)
}
