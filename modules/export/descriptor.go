package export

import (
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

// Descriptor installs the module (one line in the binary's module list).
var Descriptor = module.Descriptor{
	Name:     Name,
	Lines:    Lines,
	Postgres: module.Constructor(func(h *module.Host[pgx.Tx]) (*Module[pgx.Tx], error) { return New(h) }),
	SQLite:   module.Constructor(func(h *module.Host[*sql.Tx]) (*Module[*sql.Tx], error) { return New(h) }),
	Commands: Commands,
}
