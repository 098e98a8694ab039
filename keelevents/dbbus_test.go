package keelevents_test

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
	"github.com/keelwork/keel/keelsql"
)

func TestDatabaseBusConformance(t *testing.T) {
	both(t, func(t *testing.T, db keelsql.DB[pgx.Tx]) {
		runBusSuite(t, db)
	}, func(t *testing.T, db keelsql.DB[*sql.Tx]) {
		runBusSuite(t, db)
	})
}

func runBusSuite[TTx any](t *testing.T, db keelsql.DB[TTx]) {
	bustest.Run(t, func(t *testing.T) keelevents.Bus {
		b, err := keelevents.NewDatabaseBus(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
