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
