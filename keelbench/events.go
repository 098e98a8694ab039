package keelbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelevents/jetstream"
	"github.com/keelwork/keel/keelevents/jetstream/embedded"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
)

// EventsConfig describes an events run: outbox → relay → JetStream → inbox
// consumer on PostgreSQL (`keel bench --mode events`).
type EventsConfig struct {
	// DatabaseURL is postgres://…; each phase uses a fresh schema, dropped
	// afterwards.
	DatabaseURL string
	// NATSURL is the JetStream server; empty starts an embedded one in a
	// temporary directory.
	NATSURL string
	// N is the backlog of the relay and end-to-end phases (default 100000).
	N int
	// Rate and Duration shape the latency phase: events/s offered, one
	// transaction per event (defaults 1000/s for 10s).
	Rate     int
	Duration time.Duration
	// Keys are the ordering keys events spread over (default 1000);
	// Partitions the outbox's partitions (default 16).
	Keys, Partitions int
	// Ordered makes the consumer ordered per partition.
	Ordered bool
	// InboxBatch is the consumer's Batch: up to that many deliveries share
	// one inbox transaction (default 100; 1 is one transaction per event).
	InboxBatch int
	// RelayLanes is keelevents.Config.RelayLanes (0: its default).
	RelayLanes int
	// Concurrency is the JetStream bus's handler calls in flight per
	// unordered subscription (jetstream.Config.Concurrency; default its
	// default).
	Concurrency int
	// Phases to run: relay, e2e, latency, memory; all when empty.
	Phases []string
	// Logger for the engines' messages; nil discards.
	Logger *slog.Logger
}

// EventsResult holds the figures of an events run.
type EventsResult struct {
	N                        int
	RelayElapsed, E2EElapsed time.Duration
	RelayPerSec, E2EPerSec   float64
	LatencyEvents            int
	LatencyOffered           float64
	P50, P90, P99, Max       time.Duration
	// HeapPer1000 is the Go heap growth per 1,000 unpublished events (the
	// backlog lives in the database); TablePer1000 their outbox bytes.
	HeapPer1000, TablePer1000 float64
	Ordered                   bool
	// InboxBatch is the consumer's Batch in the run.
	InboxBatch int
}

func (r *EventsResult) String() string {
	var b strings.Builder
	mode := "unordered"
	if r.Ordered {
		mode = "ordered"
	}
	if r.RelayPerSec > 0 {
		fmt.Fprintf(&b, "events relay: %d events outbox→JetStream in %.2fs, %.0f events/s\n", r.N, r.RelayElapsed.Seconds(), r.RelayPerSec)
	}
	if r.E2EPerSec > 0 {
		fmt.Fprintf(&b, "events end to end (%s inbox consumer, up to %d events per inbox transaction): %d events in %.2fs, %.0f events/s\n",
			mode, max(r.InboxBatch, 1), r.N, r.E2EElapsed.Seconds(), r.E2EPerSec)
	}
	if r.LatencyEvents > 0 {
		fmt.Fprintf(&b, "events latency: %d events at %.0f events/s offered, EmitTx commit→consumer commit p50 %s, p90 %s, p99 %s, max %s\n",
			r.LatencyEvents, r.LatencyOffered, ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max))
	}
	if r.TablePer1000 > 0 {
		fmt.Fprintf(&b, "events memory: %.0f KiB of Go heap and %.0f KiB of outbox table per 1,000 unpublished events\n",
			r.HeapPer1000/1024, r.TablePer1000/1024)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// RunEvents runs the events phases.
func RunEvents(ctx context.Context, cfg *EventsConfig) (*EventsResult, error) {
	c := *cfg
	if !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return nil, errors.New("keelbench: the events benchmark runs on PostgreSQL (--database-url postgres://…)")
	}
	if c.N == 0 {
		c.N = 100000
	}
	if c.Rate == 0 {
		c.Rate = 1000
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Keys == 0 {
		c.Keys = 1000
	}
	if c.Partitions == 0 {
		c.Partitions = keelevents.DefaultPartitions
	}
	if c.InboxBatch == 0 {
		c.InboxBatch = 100
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.N < 1 || c.Rate < 1 || c.Duration <= 0 || c.Keys < 1 || c.InboxBatch < 1 || c.InboxBatch > keelevents.MaxBatch || c.Concurrency < 0 {
		return nil, fmt.Errorf("keelbench: events needs -n, --rate, --duration and keys ≥ 1, an inbox batch of 1..%d and a concurrency ≥ 0", keelevents.MaxBatch)
	}
	if len(c.Phases) == 0 {
		c.Phases = []string{"relay", "e2e", "latency", "memory"}
	}
	if c.NATSURL == "" {
		dir, err := os.MkdirTemp("", "keel-bench-nats-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		s, err := embedded.Start(embedded.Config{Dir: dir})
		if err != nil {
			return nil, err
		}
		defer s.Shutdown()
		c.NATSURL = s.URL()
	}
	res := &EventsResult{N: c.N, Ordered: c.Ordered, InboxBatch: c.InboxBatch}
	for _, p := range c.Phases {
		var err error
		switch p {
		case "relay":
			err = eventsPhase(ctx, &c, func(r *eventsRun) error { return r.relay(ctx, res) })
		case "e2e":
			err = eventsPhase(ctx, &c, func(r *eventsRun) error { return r.endToEnd(ctx, res) })
		case "latency":
			err = eventsPhase(ctx, &c, func(r *eventsRun) error { return r.latency(ctx, res) })
		case "memory":
			err = eventsPhase(ctx, &c, func(r *eventsRun) error { return r.memory(ctx, res) })
		default:
			err = fmt.Errorf("keelbench: events phase %q is not relay, e2e, latency or memory", p)
		}
		if err != nil {
			return res, fmt.Errorf("events %s: %w", p, err)
		}
	}
	return res, nil
}

// eventsRun is one phase's fresh schema, bus and topic.
type eventsRun struct {
	c      *EventsConfig
	db     keelsql.DB[pgx.Tx]
	bus    *jetstream.Bus
	topic  string
	stream string
	schema string

	mu   sync.Mutex
	done map[string]time.Time // event id -> consumer commit
	all  chan struct{}
	want int
}

func eventsPhase(ctx context.Context, c *EventsConfig, f func(*eventsRun) error) error {
	tag := randHex()
	schema := "keel_bench_ev_" + tag
	admin, err := pgx.Connect(ctx, keelsql.SingleConnURL(c.DatabaseURL))
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("creating schema: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE") }()
	d, err := keelpgx.Open(ctx, c.DatabaseURL, &keelpgx.Config{Schema: schema})
	if err != nil {
		return err
	}
	defer d.Close()
	m, err := keelmigrate.New(d, &keelmigrate.Config{Lines: []keelmigrate.Line{keelevents.Line(d.Dialect())}})
	if err != nil {
		return err
	}
	if _, err := m.Up(ctx, nil); err != nil {
		return err
	}
	bus, err := jetstream.New(ctx, jetstream.Config{URL: c.NATSURL, Partitions: c.Partitions, MaxAge: time.Hour, Logger: c.Logger,
		Concurrency: c.Concurrency})
	if err != nil {
		return err
	}
	defer bus.Close()
	r := &eventsRun{c: c, db: keelsql.Pgx(d.Pool()), bus: bus, topic: "bench" + tag + ".event", stream: "KEEL_BENCH" + strings.ToUpper(tag),
		schema: schema, done: map[string]time.Time{}}
	defer r.dropStream(context.WithoutCancel(ctx))
	return f(r)
}

func (r *eventsRun) dropStream(ctx context.Context) {
	js, err := natsjs.New(r.bus.Conn())
	if err == nil {
		_ = js.DeleteStream(ctx, r.stream)
	}
}

func (r *eventsRun) config(relay bool) *keelevents.Config {
	return &keelevents.Config{Partitions: r.c.Partitions, DisableRelay: !relay, StatsInterval: time.Hour, Logger: r.c.Logger,
		RelayLanes: r.c.RelayLanes}
}

// newEvents builds Events whose consumer (if consume) counts commits: the
// bus handler wrapper sees the inbox handler return only after its
// transaction committed.
func (r *eventsRun) newEvents(relay, consume bool) (*keelevents.Events[pgx.Tx], error) {
	ev, err := keelevents.New[pgx.Tx](r.db, &timedBus{Bus: r.bus, r: r}, r.config(relay))
	if err != nil {
		return nil, err
	}
	if consume {
		err = ev.Consume(keelevents.Consumer[pgx.Tx]{Name: "bench", Topics: []string{r.topic}, Ordered: r.c.Ordered,
			Batch: r.c.InboxBatch, Handle: func(context.Context, keelsql.Tx[pgx.Tx], *keelevents.Delivery) error { return nil }})
	}
	return ev, err
}

func (r *eventsRun) expect(n int) {
	r.mu.Lock()
	r.want, r.all = n, make(chan struct{})
	r.mu.Unlock()
}

func (r *eventsRun) committed(id string) {
	at := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.done[id]; dup {
		return
	}
	r.done[id] = at
	if len(r.done) == r.want {
		close(r.all)
	}
}

type timedBus struct {
	keelevents.Bus
	r *eventsRun
}

func (b *timedBus) Subscribe(ctx context.Context, sub keelevents.Subscription, h keelevents.Handler) (keelevents.Subscriber, error) {
	return b.Bus.Subscribe(ctx, sub, func(ctx context.Context, d *keelevents.Delivery) error {
		err := h(ctx, d)
		if err == nil {
			b.r.committed(d.ID)
		}
		return err
	})
}

func (r *eventsRun) event(i int) keelevents.Event {
	return keelevents.Event{Topic: r.topic, ID: fmt.Sprintf("ev-%09d", i), Key: fmt.Sprintf("key-%d", i%r.c.Keys),
		Payload: []byte(fmt.Sprintf(`{"order":"o-%d","amount":%d,"currency":"CNY","note":"benchmark event payload"}`, i%r.c.Keys, i))}
}

// prefill emits n events (not timed), 500 per transaction, relay off.
func (r *eventsRun) prefill(ctx context.Context, n int) error {
	ev, err := r.newEvents(false, false)
	if err != nil {
		return err
	}
	for i := 0; i < n; i += 500 {
		err := r.db.InTx(ctx, func(tx keelsql.Tx[pgx.Tx]) error {
			for j := i; j < min(i+500, n); j++ {
				if err := ev.EmitTx(ctx, tx, r.event(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *eventsRun) streamMsgs(ctx context.Context) (uint64, error) {
	js, err := natsjs.New(r.bus.Conn())
	if err != nil {
		return 0, err
	}
	st, err := js.Stream(ctx, r.stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

func stopEvents(ctx context.Context, ev *keelevents.Events[pgx.Tx]) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = ev.Stop(sctx)
}

// relay: N events waiting in the outbox; time until JetStream stored all.
func (r *eventsRun) relay(ctx context.Context, res *EventsResult) error {
	if err := r.prefill(ctx, r.c.N); err != nil {
		return err
	}
	ev, err := r.newEvents(true, false)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := ev.Start(ctx, nil); err != nil {
		return err
	}
	defer stopEvents(ctx, ev)
	for {
		n, err := r.streamMsgs(ctx)
		if err != nil && !errors.Is(err, natsjs.ErrStreamNotFound) {
			return err
		}
		if n >= uint64(r.c.N) {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			return fmt.Errorf("only %d of %d published after 10 minutes", n, r.c.N)
		}
		time.Sleep(2 * time.Millisecond) // polling interval of the stream's count
	}
	res.RelayElapsed = time.Since(t0)
	res.RelayPerSec = float64(r.c.N) / res.RelayElapsed.Seconds()
	return nil
}

// endToEnd: N events waiting in the outbox; time until the inbox consumer
// committed all.
func (r *eventsRun) endToEnd(ctx context.Context, res *EventsResult) error {
	if err := r.prefill(ctx, r.c.N); err != nil {
		return err
	}
	ev, err := r.newEvents(true, true)
	if err != nil {
		return err
	}
	r.expect(r.c.N)
	t0 := time.Now()
	if err := ev.Start(ctx, nil); err != nil {
		return err
	}
	defer stopEvents(ctx, ev)
	select {
	case <-r.all:
	case <-time.After(10 * time.Minute):
		return errors.New("not every event consumed after 10 minutes")
	case <-ctx.Done():
		return ctx.Err()
	}
	res.E2EElapsed = time.Since(t0)
	res.E2EPerSec = float64(r.c.N) / res.E2EElapsed.Seconds()
	return nil
}

// latency: events offered at Rate, one transaction each, from several
// emitters; each event's EmitTx commit → consumer commit.
func (r *eventsRun) latency(ctx context.Context, res *EventsResult) error {
	ev, err := r.newEvents(true, true)
	if err != nil {
		return err
	}
	if err := ev.Start(ctx, nil); err != nil {
		return err
	}
	defer stopEvents(ctx, ev)
	total := int(float64(r.c.Rate) * r.c.Duration.Seconds())
	r.expect(total)
	commits := make([]time.Time, total)
	work := make(chan int, total)
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				e := r.event(i)
				if err := r.db.InTx(ctx, func(tx keelsql.Tx[pgx.Tx]) error { return ev.EmitTx(ctx, tx, e) }); err != nil {
					select {
					case errc <- err:
					default:
					}
					return
				}
				commits[i] = time.Now()
			}
		}()
	}
	t0 := time.Now()
	interval := time.Second / time.Duration(r.c.Rate)
	for i := range total {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // the offered schedule
		}
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	offered := float64(total) / time.Since(t0).Seconds()
	select {
	case <-r.all:
	case <-time.After(2 * time.Minute):
		return errors.New("not every event consumed 2 minutes after the last emit")
	}
	var lat []time.Duration
	r.mu.Lock()
	for i := range total {
		d := r.done[r.event(i).ID].Sub(commits[i])
		lat = append(lat, max(d, 0)) // the consumer may commit before the emitter reads its clock
	}
	r.mu.Unlock()
	slices.Sort(lat)
	res.LatencyEvents, res.LatencyOffered = total, offered
	res.P50, res.P90, res.P99, res.Max = pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[len(lat)-1]
	return nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// memory: heap and table growth for an unpublished backlog of N events.
func (r *eventsRun) memory(ctx context.Context, res *EventsResult) error {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	if err := r.prefill(ctx, r.c.N); err != nil {
		return err
	}
	after := heap()
	var table int64
	if err := r.db.QueryRow(ctx, "SELECT pg_total_relation_size('"+r.schema+".keel_events_outbox')").Scan(&table); err != nil {
		return err
	}
	res.HeapPer1000 = max(float64(after)-float64(before), 0) / float64(r.c.N) * 1000
	res.TablePer1000 = float64(table) / float64(r.c.N) * 1000
	return nil
}
