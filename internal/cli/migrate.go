package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
)

// MigrateOpts are the flags of `keel migrate`.
type MigrateOpts struct {
	Direction string // up, down, status
	Line      string
	Steps     int
	Target    int
	All       bool
	Out       io.Writer
}

// Migrate runs `keel migrate up|down|status`.
func Migrate(ctx context.Context, url, schema string, o *MigrateOpts) error {
	return WithDatabase(ctx, url, schema, DriverFuncs{
		Postgres: func(ctx context.Context, d *keelpgx.Driver) error { return migrateOn(ctx, d, o) },
		SQLite:   func(ctx context.Context, d *keelsqlite.Driver) error { return migrateOn(ctx, d, o) },
	})
}

func migrateOn[TTx any](ctx context.Context, d keeldriver.Driver[TTx], o *MigrateOpts) error {
	m, err := keelmigrate.New(d, &keelmigrate.Config{Lines: allLines(d.Dialect())})
	if err != nil {
		return err
	}
	switch o.Direction {
	case "up":
		res, err := m.Up(ctx, &keelmigrate.UpOpts{Line: o.Line, TargetVersion: o.Target, OnProgress: progressBar(o.Out)})
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "applied %d migration(s)\n", len(res.Migrations))
	case "down":
		line := o.Line
		if line == "" {
			line = "engine"
		}
		res, err := m.Down(ctx, &keelmigrate.DownOpts{Line: line, Steps: o.Steps, TargetVersion: o.Target, All: o.All})
		if err != nil {
			return err
		}
		for _, mig := range res.Migrations {
			fmt.Fprintf(o.Out, "reverted %s\n", mig)
		}
	case "status":
		return printStatus(ctx, m, o.Out)
	default:
		return fmt.Errorf("unknown direction %q: use up, down or status", o.Direction)
	}
	return nil
}

func printStatus[TTx any](ctx context.Context, m *keelmigrate.Migrator[TTx], out io.Writer) error {
	lines, err := m.Status(ctx)
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintf(out, "%-12s current %d, %d applied, %d pending\n", l.Line, l.Current, len(l.Applied), len(l.Pending))
		for _, p := range l.Pending {
			fmt.Fprintf(out, "  pending  %s\n", p)
		}
	}
	return nil
}

// progressBar draws "[#####.....] 3/10 engine/003_x" on one line of a
// terminal. Written to a file or a pipe (a deploy log, CI), carriage
// returns would pile every step into one unreadable line, so there each
// step is a line of its own: "migrating 3/10 engine/003_x".
func progressBar(out io.Writer) func(done, total int, cur keelmigrate.Migration) {
	tty := isTerminal(out)
	return func(done, total int, cur keelmigrate.Migration) {
		if !tty {
			fmt.Fprintf(out, "migrating %d/%d %s\n", done, total, cur)
			return
		}
		const width = 30
		filled := width * done / max(total, 1)
		fmt.Fprintf(out, "\r[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, cur)
		if done == total {
			fmt.Fprintln(out)
		}
	}
}

// isTerminal reports whether w is a character device (a terminal), where
// a line may be redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
