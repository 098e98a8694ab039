package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/keelwork/keel/keelbench"
)

// Bench runs `keel bench`; its last line is the figure.
func Bench(ctx context.Context, cfg *keelbench.Config, out io.Writer) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	res, err := keelbench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s (%s, %d workers)\n", res, res.Driver, cfg.Workers)
	return nil
}

// BenchEvents runs `keel bench --mode events`: outbox → JetStream → inbox
// on PostgreSQL; one line per figure.
func BenchEvents(ctx context.Context, cfg *keelbench.EventsConfig, out io.Writer) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	res, err := keelbench.RunEvents(ctx, cfg)
	if res != nil && res.String() != "" {
		fmt.Fprintln(out, res)
	}
	return err
}
