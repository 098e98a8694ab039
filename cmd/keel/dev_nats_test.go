package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/jetstream/jstest"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/server/migration"
)

var natsLine = regexp.MustCompile(`keel dev: embedded NATS JetStream at (nats://127\.0\.0\.1:\d+) \(store `)

// assertDevJetStream checks that keel dev's embedded broker answers with
// JetStream on loopback.
func assertDevJetStream(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("keel dev's embedded NATS at %s: %v", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("keel dev's embedded NATS at %s has no JetStream: %v", url, err)
	}
}

// emitOne writes one event to the outbox of db, as a module's transaction
// would; the serving process's relay then publishes it.
func emitOne[TTx any](t *testing.T, db keelsql.DB[TTx], topic, id string) {
	t.Helper()
	bus, err := keelevents.NewDatabaseBus(db, nil) // only to build Events; this process runs no relay
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	ev, err := keelevents.New(db, bus, &keelevents.Config{DisableRelay: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		return ev.EmitTx(ctx, tx, keelevents.Event{Topic: topic, ID: id, Key: "k", Payload: []byte(`{"ping":true}`)})
	})
	if err != nil {
		t.Fatalf("emitting %s/%s: %v", topic, id, err)
	}
}

// awaitStreamMsgs waits until stream holds n messages on the server at url.
func awaitStreamMsgs(t *testing.T, url, stream string, n uint64) {
	t.Helper()
	awaitStreamMsgsWithin(t, url, stream, n, 60*time.Second)
}

func awaitStreamMsgsWithin(t *testing.T, url, stream string, n uint64, within time.Duration) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		var got uint64
		var last error
		if st, err := js.Stream(ctx, stream); err == nil {
			if info, err := st.Info(ctx); err == nil {
				got = info.State.Msgs
			} else {
				last = err
			}
		} else {
			last = err
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stream %s on %s holds %d messages, want %d (last error: %v)", stream, url, got, n, last)
		case <-time.After(50 * time.Millisecond): // polling interval, not synchronization
		}
	}
}

// TestServeCarriesEventsOnJetStream: `keel serve` with KEEL_NATS_URL
// relays what the outbox holds to that server's JetStream.
func TestServeCarriesEventsOnJetStream(t *testing.T) {
	t.Parallel()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: migration.Lines})
	natsURL := jstest.Embedded(t)
	env := []string{"KEEL_DATABASE_URL=" + testdb.ServeURL(t, schema), "KEEL_SCHEMA=" + schema, "KEEL_LOG_LEVEL=info",
		"KEEL_ADDR=127.0.0.1:0", "KEEL_MODULES=none", "KEEL_NATS_URL=" + natsURL}
	p := start(t, env, "serve")
	p.await(t, regexp.MustCompile(`events on NATS JetStream`), 30*time.Second)
	p.await(t, listenLine, 30*time.Second)
	emitOne(t, keelsql.Pgx(d.Pool()), "servecheck.ping", "p-1")
	awaitStreamMsgs(t, natsURL, "KEEL_SERVECHECK", 1)
}

// assertDevRelaysToJetStream emits an event into keel dev's database and
// waits for its relay to store it on the embedded broker: dev's events run
// on JetStream.
func assertDevRelaysToJetStream(t *testing.T, p *proc, dbPath, natsURL string) {
	t.Helper()
	// A second process on the dev's file waits for its write lock among
	// the demo's writers, which hold it longer on a loaded machine (four
	// race-instrumented packages at once): 10 s, the default, ran out.
	d, err := keelsqlite.Open(dbPath, &keelsqlite.Config{BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// A relay that does not publish says why in the dev's warnings, or
	// is behind: the backlog ahead of the event tells.
	defer func() {
		if t.Failed() {
			var backlog int
			_ = d.DB().QueryRow(`SELECT count(*) FROM keel_events_outbox WHERE published_at IS NULL`).Scan(&backlog)
			t.Logf("unpublished events in the dev's outbox: %d; keel dev's warnings and errors so far:\n%s", backlog, p.problems(80))
		}
	}()
	emitOne(t, keelsql.SQLite(d.DB()), "devcheck.ping", "p-1")
	// The event queues behind the demo's in its partition; on two cores
	// under four race-built packages (and their compilation) the relay has
	// taken longer than a minute to reach it.
	awaitStreamMsgsWithin(t, natsURL, "KEEL_DEVCHECK", 1, 2*time.Minute)
}

// awaitConsumed waits until some consumer on stream has acknowledged a
// message: a module's inbox consumer took an event off the broker.
func awaitConsumed(t *testing.T, url, stream string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if st, err := js.Stream(ctx, stream); err == nil {
			consumers := st.ListConsumers(ctx)
			for info := range consumers.Info() {
				if info.AckFloor.Consumer > 0 {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no consumer of stream %s on %s acknowledged a message within 60s", stream, url)
		case <-time.After(100 * time.Millisecond): // polling interval, not synchronization
		}
	}
}
