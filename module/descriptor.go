package module

import (
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/module/modcli"
)

// Descriptor is everything the `keel` binary knows of a module before it
// builds one: installing a module is adding its Descriptor to the binary's
// list, one line.
type Descriptor struct {
	// Name is short and stable; settings are "<Name>.<key>".
	Name string
	// Lines are the module's migration lines for a dialect ("postgres",
	// "sqlite"), needed by `keel migrate` without building the module.
	Lines func(dialect string) []keelmigrate.Line
	// Postgres and SQLite build the module on each database (nil: the
	// module does not run there).
	Postgres func(h *Host[pgx.Tx]) (Module[pgx.Tx], error)
	SQLite   func(h *Host[*sql.Tx]) (Module[*sql.Tx], error)
	// Commands are the module's verbs under `keel` (nil: none). Each hands
	// its work to run, which speaks to a running server.
	Commands func(run modcli.Runner) []*cobra.Command
}

// Build builds d's module on h's database.
func Build[TTx any](d *Descriptor, h *Host[TTx]) (Module[TTx], error) {
	var m any
	var err error
	switch h := any(h).(type) {
	case *Host[pgx.Tx]:
		if d.Postgres == nil {
			return nil, fmt.Errorf("module %s does not run on PostgreSQL", d.Name)
		}
		m, err = d.Postgres(h)
	case *Host[*sql.Tx]:
		if d.SQLite == nil {
			return nil, fmt.Errorf("module %s does not run on SQLite", d.Name)
		}
		m, err = d.SQLite(h)
	default:
		return nil, fmt.Errorf("module %s: no constructor for transactions of type %T", d.Name, *new(TTx))
	}
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", d.Name, err)
	}
	return m.(Module[TTx]), nil
}

// Constructor adapts a module's generic New (instantiated for one
// database) to a Descriptor's constructor, so that a failed New yields a
// nil Module rather than a typed nil pointer.
func Constructor[TTx any, M Module[TTx]](newModule func(*Host[TTx]) (M, error)) func(*Host[TTx]) (Module[TTx], error) {
	return func(h *Host[TTx]) (Module[TTx], error) {
		m, err := newModule(h)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}
