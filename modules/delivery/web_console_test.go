package delivery

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// TestDeliveryConsoleHomeAndSearch: on both databases, the home counts
// the records awaiting the customer's ACK and how long the oldest
// undelivered one has waited; the search finds a record by its number and
// by its message id, and nothing for an id no record has.
func TestDeliveryConsoleHomeAndSearch(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenPostgres(t, &testdb.Options{Lines: Lines})
		testConsoleHomeAndSearch[pgx.Tx](t, keelsql.Pgx(d.Pool()))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: Lines})
		testConsoleHomeAndSearch[*sql.Tx](t, keelsql.SQLite(d.DB()))
	})
}

func testConsoleHomeAndSearch[TTx any](t *testing.T, db keelsql.DB[TTx]) {
	ctx := context.Background()
	m, err := New(&module.Host[TTx]{DB: db, Logger: testLogger(), Settings: testSettings("cmpp_addr", "off")})
	if err != nil {
		t.Fatal(err)
	}
	ent, err := m.CreateEnterprise(ctx, "控制台")
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.CreateApplication(ctx, NewApplication{EnterpriseID: ent, Name: "回执", Account: "k801", Secret: "secret-k801",
		Protocol: ProtoCMPP30, ReportEnabled: true, MOEnabled: true, MOCode: "1069801", Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	home := func() map[string]module.Stat {
		t.Helper()
		list, err := m.Home(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]module.Stat{}
		for _, s := range list {
			out[s.Key] = s
		}
		return out
	}
	if s := home(); s["awaiting_ack"].Value != 0 || s["oldest_waiting_s"].Value != 0 || s["auto_paused_apps"].Value != 0 {
		t.Fatalf("empty: %+v", s)
	}
	seed := func(n int, st Status) *Record {
		t.Helper()
		sub := &Submit{AppID: a.ID, MsgID: strconv.FormatUint(uint64(3)<<60|uint64(n), 10), Phones: []string{"13900000001"},
			SrcID: "1069", Content: []byte("hi"), WantReport: true}
		if _, err := m.st.insertSubmit(ctx, db, sub); err != nil {
			t.Fatal(err)
		}
		rec := m.reportRecord(sub, fmt.Sprintf("console%d", n), "DELIVRD", "2608121200", "2608121201", "13900000001", uint32(n))
		rec.Status, rec.CreatedAt = st, time.Now().Add(-10*time.Minute).UTC().Truncate(time.Microsecond)
		id, _, err := m.st.insertRecord(ctx, db, rec)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.st.record(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	waiting := seed(1, StatusAwaitingACK)
	seed(2, StatusAwaitingACK)
	seed(3, StatusDelivered)
	s := home()
	if s["awaiting_ack"].Value != 2 || s["awaiting_ack"].Link != "/delivery/records?status=awaiting_ack" {
		t.Fatalf("two awaiting ACK: %+v", s["awaiting_ack"])
	}
	// The seeded records entered their status ten minutes ago (created and
	// updated at once): the oldest has waited that long, not counting the
	// delivered one.
	if v := s["oldest_waiting_s"].Value; v < 599 || v > 900 || s["oldest_waiting_s"].Level != module.LevelWarn {
		t.Fatalf("oldest waiting %v s (%v)", v, s["oldest_waiting_s"].Level)
	}
	id := strconv.FormatInt(waiting.ID, 10)
	for _, q := range []string{id, waiting.MsgID} {
		hits, err := m.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].Path != "/delivery/records/"+id || hits[0].TitleEN == "" {
			t.Fatalf("search %q: %+v", q, hits)
		}
	}
	if hits, err := m.Search(ctx, "999999999"); err != nil || len(hits) != 0 {
		t.Fatalf("search nothing: %+v %v", hits, err)
	}
}
