package keelevents_test

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/bustest"
)

func TestDatabaseBusConformance(t *testing.T) {
	each(t, runBusSuite[pgx.Tx], runBusSuite[*sql.Tx])
}

func runBusSuite[TTx any](t *testing.T, env *tenv[TTx]) {
	bustest.Run(t, func(t *testing.T) keelevents.Bus {
		b, err := keelevents.NewDatabaseBus(env.db, &keelevents.DatabaseBusConfig{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
