// Package eventcrash is the multi-process crash test of the events
// backbone, parameterized by bus so every Bus implementation runs it: relay
// processes SIGKILLed between a publish and its mark, consumer processes
// SIGKILLed between their business commit and the acknowledgement, and
// three relay processes sharing the partitions while keys stay in order.
// Afterwards every event must have exactly one business effect.
//
// Children are the test binary itself, re-executed with EnvRole set: a
// package using the harness calls Main from its TestMain before m.Run, with
// the same Harness its tests pass to the scenarios.
//
//	var h = eventcrash.Harness{Bus: "database", NewBus: eventcrash.DatabaseBus}
//	func TestMain(m *testing.M) { eventcrash.Main(h); os.Exit(m.Run()) }
//	func TestRelayKilled(t *testing.T) { eventcrash.RelayKilled(t, h) }
//
// Children inherit the environment, so a bus configured from environment
// variables (a NATS URL) is configured alike in parent and children.
package eventcrash

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
)

// Environment of a child process.
const (
	EnvRole     = "KEEL_EVCRASH_ROLE"      // "relay" or "consumer"
	EnvDriver   = "KEEL_EVCRASH_DRIVER"    // "postgres" or "sqlite"
	EnvDSN      = "KEEL_EVCRASH_DSN"       // PostgreSQL URL with search_path, or the SQLite file
	EnvBlockAt  = "KEEL_EVCRASH_BLOCK_AT"  // block (to be killed) at the n-th publish or commit; 0 never
	EnvInstance = "KEEL_EVCRASH_INSTANCE"  // a label for logs
	EnvToken    = "KEEL_EVCRASH_NAMESPACE" // per-test token the bus may use to isolate its streams
	EnvWindow   = "KEEL_EVCRASH_WINDOW"    // the consumer's Window (WindowConsumerKilled)
)

// Harness names a bus and builds it, in the test process and in children.
type Harness struct {
	// Bus names the bus in test names and logs ("database", "jetstream").
	Bus string
	// NewBus returns the bus on db, which is a keelsql.DB[pgx.Tx] or a
	// keelsql.DB[*sql.Tx]; namespace is unique per test run (a stream name
	// prefix for a broker). Called once per process.
	NewBus func(db any, namespace string) (keelevents.Bus, error)
	// SQLite includes SQLite in the scenarios (the database bus runs on
	// both; a broker bus is tested on PostgreSQL only).
	SQLite bool
	// Env is added to the children's environment (a server's URL that only
	// the test knows, for instance).
	Env []string
	// Diagnose, if set, describes the bus's side of namespace (a broker's
	// consumers, say) for a scenario that timed out.
	Diagnose func(namespace string) string
}

// DatabaseBus is the NewBus of the in-database bus.
func DatabaseBus(db any, _ string) (keelevents.Bus, error) {
	cfg := &keelevents.DatabaseBusConfig{Logger: logger()}
	switch d := db.(type) {
	case keelsql.DB[pgx.Tx]:
		return keelevents.NewDatabaseBus(d, cfg)
	case keelsql.DB[*sql.Tx]:
		return keelevents.NewDatabaseBus(d, cfg)
	}
	return nil, fmt.Errorf("eventcrash: unknown database %T", db)
}

// Topic and consumer of the scenarios.
const (
	topic        = "crash.effect"
	consumerName = "effects"
	partitions   = 8
	leaseTTL     = 600 * time.Millisecond
	ackWait      = time.Second
)

// effectSQL creates the business effect: one row per handler commit. It
// has no unique key on purpose: a second effect of one event must be
// counted, not refused.
const effectSQL = `CREATE TABLE evcrash_effect (event_id text NOT NULL, event_key text NOT NULL, n integer NOT NULL, pid integer NOT NULL)`

// effectSeqSQL numbers the effects in the order they were written
// (PostgreSQL), so that a key's order across processes can be read back.
const effectSeqSQL = `ALTER TABLE evcrash_effect ADD COLUMN seq bigserial`

func insertEffect(driver string) string {
	if driver == "postgres" {
		return `INSERT INTO evcrash_effect (event_id, event_key, n, pid) VALUES ($1, $2, $3, $4)`
	}
	return `INSERT INTO evcrash_effect (event_id, event_key, n, pid) VALUES (?1, ?2, ?3, ?4)`
}

func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func eventsConfig(disableRelay bool) *keelevents.Config {
	return &keelevents.Config{Partitions: partitions, LeaseTTL: leaseTTL, RelayBatch: 50, StatsInterval: time.Hour,
		DisableRelay: disableRelay, Logger: logger()}
}

// Main runs the child role named by EnvRole and exits; without it, it
// returns at once. Call it first in TestMain.
func Main(h Harness) {
	role := os.Getenv(EnvRole)
	if role == "" {
		return
	}
	err := child(h, role)
	fmt.Fprintf(os.Stderr, "eventcrash %s: %v\n", role, err)
	os.Exit(3)
}

func child(h Harness, role string) error {
	block, _ := strconv.Atoi(os.Getenv(EnvBlockAt))
	ctx := context.Background()
	switch os.Getenv(EnvDriver) {
	case "postgres":
		d, err := keelpgx.Open(ctx, os.Getenv(EnvDSN), nil)
		if err != nil {
			return err
		}
		return runChild(ctx, h, role, "postgres", keelsql.Pgx(d.Pool()), block)
	case "sqlite":
		d, err := keelsqlite.Open(os.Getenv(EnvDSN), nil)
		if err != nil {
			return err
		}
		return runChild(ctx, h, role, "sqlite", keelsql.SQLite(d.DB()), block)
	}
	return fmt.Errorf("unknown %s %q", EnvDriver, os.Getenv(EnvDriver))
}

// blocker stops the process at the n-th call: it says so on stdout and
// waits for the SIGKILL the parent sends on reading it.
type blocker struct {
	mu sync.Mutex
	n  int
	at int
}

func (b *blocker) hit(what string) {
	if b.at <= 0 {
		return
	}
	b.mu.Lock()
	b.n++
	first, stop := b.n == b.at, b.n >= b.at
	b.mu.Unlock()
	if first {
		fmt.Printf("BLOCKED %s\n", what)
	}
	if stop {
		select {} // the parent SIGKILLs us here
	}
}

// gate holds every later call once the process has blocked, so that it
// does no more work before it dies.
func (b *blocker) gate() {
	if b.at <= 0 {
		return
	}
	b.mu.Lock()
	stop := b.n >= b.at
	b.mu.Unlock()
	if stop {
		select {}
	}
}

// killBus wraps a bus so that the process blocks right after a publish
// the bus acknowledged (before the relay marks it), or right after a
// handler's transaction committed (before the acknowledgement).
type killBus struct {
	keelevents.Bus
	publish, commit *blocker
}

func (k *killBus) Publish(ctx context.Context, msgs []keelevents.Message) (int, error) {
	n, err := k.Bus.Publish(ctx, msgs)
	if n > 0 {
		k.publish.hit("after publish")
	}
	return n, err
}

func (k *killBus) Subscribe(ctx context.Context, sub keelevents.Subscription, h keelevents.Handler) (keelevents.Subscriber, error) {
	if hw := sub.HandleWindow; hw != nil {
		sub.HandleWindow = func(ctx context.Context, ds []*keelevents.Delivery) []error {
			k.commit.gate()
			errs := hw(ctx, ds)
			for _, err := range errs {
				if err == nil {
					k.commit.hit("after commit")
					break
				}
			}
			return errs
		}
	}
	return k.Bus.Subscribe(ctx, sub, func(ctx context.Context, d *keelevents.Delivery) error {
		k.commit.gate()
		err := h(ctx, d)
		if err == nil {
			k.commit.hit("after commit")
		}
		return err
	})
}

func runChild[TTx any](ctx context.Context, h Harness, role, driver string, db keelsql.DB[TTx], block int) error {
	inner, err := h.NewBus(db, os.Getenv(EnvToken))
	if err != nil {
		return err
	}
	bus := &killBus{Bus: inner, publish: &blocker{}, commit: &blocker{}}
	var ev *keelevents.Events[TTx]
	switch role {
	case "relay":
		bus.publish.at = block
		ev, err = keelevents.New(db, keelevents.Bus(bus), eventsConfig(false))
	case "consumer":
		bus.commit.at = block
		ev, err = keelevents.New(db, keelevents.Bus(bus), eventsConfig(true))
		if err == nil {
			c := effectConsumer[TTx](driver, nil)
			c.Window, _ = strconv.Atoi(os.Getenv(EnvWindow))
			if c.Window > 1 {
				c.Batch = 8
			}
			err = ev.Consume(c)
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		return err
	}
	if err := ev.Start(ctx, nil); err != nil {
		return err
	}
	fmt.Println("READY")
	select {} // until killed
}

// effectConsumer writes one effect row per event; seen (if not nil)
// records the order in which each key's events were applied.
func effectConsumer[TTx any](driver string, seen func(key string, n int)) keelevents.Consumer[TTx] {
	return keelevents.Consumer[TTx]{
		Name: consumerName, Topics: []string{"crash.>"}, Ordered: true, AckWait: ackWait,
		Backoff: []time.Duration{20 * time.Millisecond},
		Handle: func(ctx context.Context, tx keelsql.Tx[TTx], d *keelevents.Delivery) error {
			var body struct{ N int }
			if err := json.Unmarshal(d.Payload, &body); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insertEffect(driver), d.ID, d.Key, body.N, os.Getpid()); err != nil {
				return err
			}
			if seen != nil {
				seen(d.Key, body.N)
			}
			return nil
		},
	}
}

// proc is a child process.
type proc struct {
	cmd     *exec.Cmd
	blocked chan struct{}
	ready   chan struct{}
	exited  chan struct{}
}

func spawn(t *testing.T, h Harness, role, driver, dsn, ns string, blockAt int, label string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), EnvRole+"="+role, EnvDriver+"="+driver, EnvDSN+"="+dsn,
		EnvBlockAt+"="+strconv.Itoa(blockAt), EnvInstance+"="+label, EnvToken+"="+ns)
	cmd.Env = append(cmd.Env, h.Env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", label, err)
	}
	p := &proc{cmd: cmd, blocked: make(chan struct{}), ready: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch {
			case sc.Text() == "READY":
				close(p.ready)
			case strings.HasPrefix(sc.Text(), "BLOCKED"):
				close(p.blocked)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill() // SIGKILL
	<-p.exited
}

// env is one scenario's database and the test process's own Events.
type env[TTx any] struct {
	driver, dsn, ns string
	db              keelsql.DB[TTx]
	h               Harness
}

func lines(dialect string) []keelmigrate.Line { return []keelmigrate.Line{keelevents.Line(dialect)} }

// each runs a scenario on PostgreSQL and, if the harness says so, SQLite.
func each(t *testing.T, h Harness, pg func(t *testing.T, e *env[pgx.Tx]), lite func(t *testing.T, e *env[*sql.Tx])) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: lines})
		pg(t, &env[pgx.Tx]{driver: "postgres", dsn: testdb.PostgresSchemaURL(t, schema), ns: schema, db: keelsql.Pgx(d.Pool()), h: h})
	})
	if !h.SQLite {
		return
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		d, path := testdb.OpenSQLite(t, &testdb.Options{Lines: lines})
		ns := "evc_" + strconv.FormatInt(time.Now().UnixNano(), 36)
		lite(t, &env[*sql.Tx]{driver: "sqlite", dsn: path, ns: ns, db: keelsql.SQLite(d.DB()), h: h})
	})
}

func (e *env[TTx]) events(t *testing.T, relay bool) (*keelevents.Events[TTx], keelevents.Bus) {
	t.Helper()
	bus, err := e.h.NewBus(e.db, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ev, err := keelevents.New(e.db, bus, eventsConfig(!relay))
	if err != nil {
		t.Fatal(err)
	}
	return ev, bus
}

func (e *env[TTx]) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := e.db.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (e *env[TTx]) emitAll(t *testing.T, ev *keelevents.Events[TTx], from, to, keys int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i++ {
		k := i % keys
		err := e.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			return ev.EmitTx(ctx, tx, keelevents.Event{Topic: topic, ID: fmt.Sprintf("e-%d", i), Key: fmt.Sprintf("key-%d", k),
				Payload: json.RawMessage(fmt.Sprintf(`{"N":%d}`, i/keys))})
		})
		if err != nil {
			t.Fatalf("emitting e-%d: %v", i, err)
		}
	}
}

func (e *env[TTx]) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	waitOr(t, what, d, cond, nil)
}

// waitOr is waitFor that, on the deadline, also reports what diagnose
// says of the state left behind.
func waitOr(t *testing.T, what string, d time.Duration, cond func() bool, diagnose func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			if diagnose != nil {
				t.Fatalf("timed out waiting for %s\n%s", what, diagnose())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// missing describes the events of e-0..e-(n-1) without an effect and the
// bus's side, for a scenario that timed out.
func (e *env[TTx]) missing(t *testing.T, n int) string {
	t.Helper()
	seen := map[string]bool{}
	rows, err := e.db.Query(context.Background(), "SELECT DISTINCT event_id FROM evcrash_effect")
	if err != nil {
		return fmt.Sprintf("reading the effects: %v", err)
	}
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			seen[id] = true
		}
	}
	rows.Close()
	var miss []string
	for i := range n {
		if id := fmt.Sprintf("e-%d", i); !seen[id] {
			miss = append(miss, id)
		}
	}
	if len(miss) > 20 {
		miss = append(miss[:20], "…")
	}
	out := fmt.Sprintf("%d of %d events without an effect: %s", n-len(seen), n, strings.Join(miss, " "))
	if e.h.Diagnose != nil {
		out += "\n" + e.h.Diagnose(e.ns)
	}
	return out
}

func waitChan(t *testing.T, what string, c <-chan struct{}, exited <-chan struct{}) bool {
	t.Helper()
	select {
	case <-c:
		return true
	case <-exited:
		t.Fatalf("the child exited while waiting for %s", what)
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	return false
}

// checkEffects requires exactly one effect per event e-0..e-(n-1).
func (e *env[TTx]) checkEffects(t *testing.T, n int) {
	t.Helper()
	if got := e.count(t, "SELECT count(*) FROM evcrash_effect"); got != n {
		dups := e.count(t, "SELECT count(*) FROM (SELECT event_id FROM evcrash_effect GROUP BY event_id HAVING count(*) > 1) d")
		t.Fatalf("%d effects for %d events (%d events with more than one)", got, n, dups)
	}
	if got := e.count(t, "SELECT count(DISTINCT event_id) FROM evcrash_effect"); got != n {
		t.Fatalf("%d distinct events applied, want %d", got, n)
	}
}

// order records, per key, the sequence numbers in application order.
type order struct {
	mu   sync.Mutex
	keys map[string][]int
}

func (o *order) add(key string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys == nil {
		o.keys = map[string][]int{}
	}
	o.keys[key] = append(o.keys[key], n)
}

func (o *order) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, ns := range o.keys {
		for i, n := range ns {
			if n != i {
				t.Fatalf("key %s applied out of order: %v", k, ns)
			}
		}
	}
}
