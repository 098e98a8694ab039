package keel_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/keeltype"
)

// The test "module": downstream deliveries in a table of the test database,
// requeued in bulk, with the delivery module's rule: pending, failed,
// unconfirmed, rejected and delivered are eligible; awaiting_ack never is
// (an ACK may still arrive, so it is rule-skipped).

type delivery struct {
	ID        string
	App       string
	Status    string
	CreatedAt time.Time
}

type deliveryFilter struct {
	App    string `json:"app,omitempty"`
	Status string `json:"status,omitempty"`
}

type requeueArgs struct {
	DeliveryID string `json:"delivery_id"`
	App        string `json:"app"`
}

func (requeueArgs) Kind() string { return "test.requeue" }

var eligibleStatus = map[string]bool{"pending": true, "failed": true, "unconfirmed": true, "rejected": true, "delivered": true}

// deliveryTable reads and writes the subject table with plain SQL through
// the driver's own pool (PostgreSQL) or write connection (SQLite; reads are
// collected before anything is emitted, so the writer is free again).
type deliveryTable struct {
	exec  func(ctx context.Context, q string, args ...any) error
	query func(ctx context.Context) ([]delivery, error)
}

func newDeliveryTable(t *testing.T, d any) *deliveryTable {
	t.Helper()
	ctx := context.Background()
	var tb *deliveryTable
	switch d := d.(type) {
	case *keelpgx.Driver:
		pool := d.Pool()
		tb = &deliveryTable{
			exec: func(ctx context.Context, q string, args ...any) error {
				_, err := pool.Exec(ctx, q, args...)
				return err
			},
			query: func(ctx context.Context) ([]delivery, error) {
				rows, err := pool.Query(ctx, `SELECT id, app, status, created_at FROM test_delivery ORDER BY id`)
				if err != nil {
					return nil, err
				}
				defer rows.Close()
				var out []delivery
				for rows.Next() {
					var r delivery
					var at int64
					if err := rows.Scan(&r.ID, &r.App, &r.Status, &at); err != nil {
						return nil, err
					}
					r.CreatedAt = time.UnixMicro(at).UTC()
					out = append(out, r)
				}
				return out, rows.Err()
			},
		}
	case *keelsqlite.Driver:
		db := d.DB()
		tb = &deliveryTable{
			exec: func(ctx context.Context, q string, args ...any) error {
				_, err := db.ExecContext(ctx, q, args...)
				return err
			},
			query: func(ctx context.Context) ([]delivery, error) {
				return collectDeliveries(db.QueryContext(ctx, `SELECT id, app, status, created_at FROM test_delivery ORDER BY id`))
			},
		}
	default:
		t.Fatalf("unknown driver %T", d)
	}
	if err := tb.exec(ctx, `CREATE TABLE test_delivery (id text PRIMARY KEY, app text NOT NULL, status text NOT NULL, created_at bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return tb
}

func collectDeliveries(rows *sql.Rows, err error) ([]delivery, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []delivery
	for rows.Next() {
		var r delivery
		var at int64
		if err := rows.Scan(&r.ID, &r.App, &r.Status, &at); err != nil {
			return nil, err
		}
		r.CreatedAt = time.UnixMicro(at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

func (tb *deliveryTable) add(t *testing.T, id, app, status string, at time.Time) {
	t.Helper()
	if err := tb.exec(context.Background(), `INSERT INTO test_delivery (id, app, status, created_at) VALUES ($1, $2, $3, $4)`,
		id, app, status, at.UnixMicro()); err != nil {
		t.Fatal(err)
	}
}

// deliverySource is the module's BatchSource.
type deliverySource struct{ tb *deliveryTable }

func (deliverySource) Kind() string { return "downstream.requeue" }

func (s deliverySource) matching(ctx context.Context, f deliveryFilter, snapshot time.Time) ([]delivery, error) {
	all, err := s.tb.query(ctx)
	if err != nil {
		return nil, err
	}
	var out []delivery
	for _, r := range all {
		if r.CreatedAt.After(snapshot) || (f.App != "" && r.App != f.App) || (f.Status != "" && r.Status != f.Status) {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

func (s deliverySource) Preview(ctx context.Context, f deliveryFilter, snapshot time.Time) (*keel.BatchPreview, error) {
	rows, err := s.matching(ctx, f, snapshot)
	if err != nil {
		return nil, err
	}
	pv := &keel.BatchPreview{ByState: map[string]int64{}}
	apps := map[string]bool{}
	for _, r := range rows {
		pv.Hits++
		pv.ByState[r.Status]++
		if pv.Earliest == nil || r.CreatedAt.Before(*pv.Earliest) {
			pv.Earliest = &r.CreatedAt
		}
		if eligibleStatus[r.Status] {
			pv.Eligible++
			apps[r.App] = true
		} else {
			pv.RuleSkipped++
		}
	}
	pv.DistinctKeys = int64(len(apps))
	return pv, nil
}

func (s deliverySource) Subjects(ctx context.Context, f deliveryFilter, snapshot time.Time, emit func(string, string, keel.JobArgs) error) error {
	rows, err := s.matching(ctx, f, snapshot)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if !eligibleStatus[r.Status] {
			continue
		}
		if err := emit(r.ID, "app:"+r.App, requeueArgs{DeliveryID: r.ID, App: r.App}); err != nil {
			return err
		}
	}
	return nil
}

// gateway records side effects: how often each delivery was sent.
type gateway struct {
	mu   sync.Mutex
	sent map[string]int
}

func newGateway() *gateway { return &gateway{sent: map[string]int{}} }

func (g *gateway) send(id string) {
	g.mu.Lock()
	g.sent[id]++
	g.mu.Unlock()
}

func (g *gateway) count(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sent[id]
}

func (g *gateway) snapshot() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.sent))
	for k, v := range g.sent {
		out[k] = v
	}
	return out
}

// requeueWorker sends unless the gateway already has it (the ACK arrived),
// checking the batch right before the side effect. fail decides per app.
type requeueWorker struct {
	gw    *gateway
	delay time.Duration
	fail  func(app string) error
}

func (w *requeueWorker) Work(ctx context.Context, job *keel.Job[requeueArgs]) error {
	if w.gw.count(job.Args.DeliveryID) > 0 {
		return nil // already sent and acknowledged: never send twice
	}
	if w.delay > 0 {
		time.Sleep(w.delay)
	}
	if w.fail != nil {
		if err := w.fail(job.Args.App); err != nil {
			return err
		}
	}
	if err := keel.BatchCheck(ctx, job); err != nil {
		return err
	}
	w.gw.send(job.Args.DeliveryID)
	return nil
}

// Check: a delivery the gateway has was sent; otherwise send it now.
func (w *requeueWorker) Check(ctx context.Context, job *keel.Job[requeueArgs]) (keel.CheckResult, error) {
	if w.gw.count(job.Args.DeliveryID) > 0 {
		return keel.CheckResult{Decision: keel.CheckCompleted}, nil
	}
	return keel.CheckResult{Decision: keel.CheckRetry}, nil
}

var testSigningKey = []byte("test-signing-key-0123456789abcdef")

func batchConfig(workers *keel.Workers) *keel.Config {
	cfg := fastConfig(workers)
	cfg.BatchSigningKey = testSigningKey
	return cfg
}

// insertOnly is a client that works nothing and runs no maintenance.
func insertOnly[TTx any](t *testing.T, d keeldriver.Driver[TTx]) *keel.Client[TTx] {
	cfg := batchConfig(nil)
	cfg.Queues = nil
	cfg.DisableMaintenance = true
	return startClient(t, d, cfg)
}

func createBatch[TTx any](t *testing.T, c *keel.Client[TTx], src deliverySource, f deliveryFilter, opts keel.BatchOpts) *keeltype.BatchRow {
	t.Helper()
	ctx := keel.WithActor(context.Background(), "user:alice")
	pv, err := keel.BatchPreviewOf(ctx, c, src, f)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if opts.Reason == "" {
		opts.Reason = "incident INC-42: replay"
	}
	b, err := keel.BatchCreate(ctx, c, src, pv.Token, opts)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return b
}

// assertExact checks that the counters sum to the total, that the total is
// the number of items and that a recount from items shows no drift.
func assertExact[TTx any](t *testing.T, c *keel.Client[TTx], id int64, wantTotal int64) *keeltype.BatchRow {
	t.Helper()
	ctx := context.Background()
	b, err := c.BatchGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, n := range b.Counts {
		sum += n
	}
	if sum != b.Total || b.Total != wantTotal {
		t.Fatalf("counters %v sum to %d, total %d, want %d", b.Counts, sum, b.Total, wantTotal)
	}
	drift, err := c.BatchReconcile(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if !drift.None() {
		t.Fatalf("counters drifted: counters %v, items %v", drift.Counter, drift.Items)
	}
	return b
}

func waitBatch[TTx any](t *testing.T, c *keel.Client[TTx], id int64, within time.Duration, want ...keeltype.BatchState) *keeltype.BatchRow {
	t.Helper()
	var b *keeltype.BatchRow
	waitFor(t, within, fmt.Sprintf("batch %d to become %v", id, want), func() bool {
		var err error
		if b, err = c.BatchGet(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(want, b.State)
	})
	return b
}

// allItems pages through every item of a batch.
func allItems[TTx any](t *testing.T, c *keel.Client[TTx], id int64, p keel.BatchItemsParams) []*keeltype.JobRow {
	t.Helper()
	p.BatchID, p.Limit = id, 7
	var out []*keeltype.JobRow
	for {
		page, err := c.BatchItems(context.Background(), &p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < p.Limit {
			return out
		}
		p.AfterSubject = page[len(page)-1].Subject
	}
}
