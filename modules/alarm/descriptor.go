package alarm

import (
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/module"
)

// Descriptor installs the module in a binary: its name, migration lines,
// constructors and verbs.
var Descriptor = module.Descriptor{
	Name:     Name,
	Lines:    Lines,
	Postgres: module.Constructor(New[pgx.Tx]),
	SQLite:   module.Constructor(New[*sql.Tx]),
	Commands: commands,
}
