package tracking

import (
	"github.com/jackc/pgx/v5"

	"database/sql"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
)

func keelsqlPgx(d *keelpgx.Driver) keelsql.DB[pgx.Tx]        { return keelsql.Pgx(d.Pool()) }
func keelsqlSQLite(d *keelsqlite.Driver) keelsql.DB[*sql.Tx] { return keelsql.SQLite(d.DB()) }
