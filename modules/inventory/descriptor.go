package inventory

import (
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

// Descriptor installs the module in a binary: its name, migration lines,
// constructors and its `keel inventory` verbs.
var Descriptor = module.Descriptor{
	Name:     Name,
	Lines:    Lines,
	Commands: Commands,
	Postgres: module.Constructor(func(h *module.Host[pgx.Tx]) (*Module[pgx.Tx], error) { return New(h) }),
	SQLite:   module.Constructor(func(h *module.Host[*sql.Tx]) (*Module[*sql.Tx], error) { return New(h) }),
}
