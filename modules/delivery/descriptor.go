package delivery

import (
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

// Descriptor installs the module in a binary: its name, migration lines
// and constructors (it has no verbs of its own under `keel`).
var Descriptor = module.Descriptor{
	Name:     LineName,
	Lines:    Lines,
	Postgres: module.Constructor(New[pgx.Tx]),
	SQLite:   module.Constructor(New[*sql.Tx]),
}
