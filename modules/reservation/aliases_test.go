package reservation

import (
	"database/sql"

	"github.com/jackc/pgx/v5"
)

// Short names of the drivers' transaction types for tests written per
// driver.
type (
	pgxTx = pgx.Tx
	sqlTx = *sql.Tx
)
