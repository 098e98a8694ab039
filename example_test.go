package keel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/keeltype"
)

// The examples run on embedded SQLite in a temporary file, so that they
// compile and run with the tests and the documentation cannot rot; on
// PostgreSQL only the driver differs (keelpgx.Open).

// ChargeArgs is a payment charge: the order id is its stable idempotency key.
type ChargeArgs struct {
	OrderID string `json:"order_id"`
	Cents   int64  `json:"cents"`
}

func (ChargeArgs) Kind() string { return "payment.charge" }

var (
	errDeclined         = errors.New("card declined")
	errTimeoutAfterSend = errors.New("timed out after sending")
)

// psp stands in for a payment provider: it times out once after really
// charging, and declines order o-9.
type psp struct {
	charged  atomic.Bool
	timedOut atomic.Bool
}

func (p *psp) Charge(_ context.Context, orderID string, _ int64, _ int64) error {
	if orderID == "o-9" {
		return errDeclined
	}
	p.charged.Store(true)
	if !p.timedOut.Swap(true) {
		return errTimeoutAfterSend // charged, but we never heard
	}
	return nil
}

// ChargeWorker classifies what the provider said.
type ChargeWorker struct{ psp *psp }

func (w *ChargeWorker) Work(ctx context.Context, job *keel.Job[ChargeArgs]) error {
	err := w.psp.Charge(ctx, job.Args.OrderID, job.Args.Cents, job.Fence)
	switch {
	case errors.Is(err, errDeclined):
		return keel.JobPermanent(err) // → manual, for an operator
	case errors.Is(err, errTimeoutAfterSend):
		return keel.JobUnknown(err) // → Check before any retry
	}
	return err
}

// Check asks the provider whether the unknown charge happened.
func (w *ChargeWorker) Check(ctx context.Context, job *keel.Job[ChargeArgs]) (keel.CheckResult, error) {
	if w.psp.charged.Load() {
		return keel.CheckResult{Decision: keel.CheckCompleted, Result: "charged"}, nil
	}
	return keel.CheckResult{Decision: keel.CheckRetry}, nil
}

// openExample opens a migrated SQLite database in a temporary directory.
func openExample(ctx context.Context) (*keelsqlite.Driver, func()) {
	dir, err := os.MkdirTemp("", "keel-example")
	if err != nil {
		panic(err)
	}
	d, err := keelsqlite.Open(filepath.Join(dir, "keel.db"), nil)
	if err != nil {
		panic(err)
	}
	m, err := keelmigrate.New(d, nil)
	if err != nil {
		panic(err)
	}
	if _, err := m.Up(ctx, nil); err != nil {
		panic(err)
	}
	return d, func() { _ = d.Close(); _ = os.RemoveAll(dir) }
}

// exampleConfig polls and retries quickly, for an example that ends in
// milliseconds; production keeps the defaults.
func exampleConfig(workers *keel.Workers) *keel.Config {
	return &keel.Config{
		Workers:                workers,
		FetchPollInterval:      20 * time.Millisecond,
		PromoteInterval:        10 * time.Millisecond,
		RetryPolicy:            &keel.JitterRetryPolicy{Base: time.Millisecond, Cap: 5 * time.Millisecond},
		CompleterFlushInterval: time.Millisecond,
		Logger:                 slog.New(slog.DiscardHandler),
	}
}

// settle waits until the job reaches a state where nothing will happen
// without an operator (final or manual).
func settle[TTx any](ctx context.Context, c *keel.Client[TTx], id int64) *keeltype.JobRow {
	return until(ctx, c, id, func(r *keeltype.JobRow) bool { return r.State.Final() || r.State == keeltype.JobStateManual })
}

// until polls the job until cond holds.
func until[TTx any](ctx context.Context, c *keel.Client[TTx], id int64, cond func(*keeltype.JobRow) bool) *keeltype.JobRow {
	for {
		row, err := c.JobGet(ctx, id)
		if err != nil {
			panic(err)
		}
		if cond(row) {
			return row
		}
		select {
		case <-ctx.Done():
			panic(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// The README's taste: a charge whose failures are classified. A timeout
// after sending is unknown: Check asks the provider, which confirms, so the
// charge completes without being sent twice; a decline is permanent and
// waits for an operator; inserting the same idempotency key again returns
// the original job.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	driver, closeDB := openExample(ctx)
	defer closeDB()

	workers := keel.NewWorkers()
	keel.AddWorker[ChargeArgs](workers, &ChargeWorker{psp: &psp{}})
	cfg := exampleConfig(workers)
	cfg.FlowLimits = []keeltype.FlowLimit{{Pattern: "psp:*", Rate: 50, MaxRunning: 20}}
	client, err := keel.NewClient(driver, cfg)
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(context.Background())

	charge, _ := client.Insert(ctx, ChargeArgs{OrderID: "o-7", Cents: 1999},
		&keel.InsertOpts{IdempotencyKey: "o-7:charge", FlowKey: "psp:stripe"})
	again, _ := client.Insert(ctx, ChargeArgs{OrderID: "o-7", Cents: 1999},
		&keel.InsertOpts{IdempotencyKey: "o-7:charge", FlowKey: "psp:stripe"})
	declined, _ := client.Insert(ctx, ChargeArgs{OrderID: "o-9", Cents: 500},
		&keel.InsertOpts{IdempotencyKey: "o-9:charge", FlowKey: "psp:stripe"})

	fmt.Println("same job again:", again.Duplicate && again.Job.ID == charge.Job.ID)
	fmt.Println("o-7:", settle(ctx, client, charge.Job.ID).State)
	fmt.Println("o-9:", settle(ctx, client, declined.Job.ID).State)
	// Output:
	// same job again: true
	// o-7: completed
	// o-9: manual
}

// NoticeArgs notifies a user that their order shipped.
type NoticeArgs struct {
	OrderID string `json:"order_id"`
}

func (NoticeArgs) Kind() string { return "order.notice" }

// A business write and the job that follows from it commit together or
// not at all: the module's SQL and the engine's insert share one
// transaction (keelsql on either database).
func ExampleClient_InsertTx() {
	ctx := context.Background()
	driver, closeDB := openExample(ctx)
	defer closeDB()
	client, err := keel.NewClient(driver, exampleConfig(nil))
	if err != nil {
		panic(err)
	}
	db := keelsql.SQLite(driver.DB())
	if _, err := db.Exec(ctx, "CREATE TABLE shipment (order_id TEXT PRIMARY KEY, at INTEGER NOT NULL)"); err != nil {
		panic(err)
	}
	ship := func(orderID string, fail bool) error {
		return db.InTx(ctx, func(tx keelsql.Tx[*sql.Tx]) error {
			if _, err := tx.Exec(ctx, "INSERT INTO shipment VALUES (?1, ?2)", orderID, time.Now()); err != nil {
				return err
			}
			if _, err := client.InsertTx(ctx, tx.Native(), NoticeArgs{OrderID: orderID},
				&keel.InsertOpts{IdempotencyKey: orderID + ":notice"}); err != nil {
				return err
			}
			if fail {
				return errors.New("the carrier refused the parcel")
			}
			return nil
		})
	}
	fmt.Println(ship("o-1", false))
	fmt.Println(ship("o-2", true))
	jobs, _ := client.JobList(ctx, &keel.JobListParams{Kinds: []string{"order.notice"}})
	var shipped int
	_ = db.QueryRow(ctx, "SELECT count(*) FROM shipment").Scan(&shipped)
	fmt.Println("shipments:", shipped, "notices:", len(jobs))
	// Output:
	// <nil>
	// the carrier refused the parcel
	// shipments: 1 notices: 1
}

// AckArgs is a message that succeeds only when the counterpart's
// acknowledgement arrives.
type AckArgs struct {
	MsgID string `json:"msg_id"`
}

func (AckArgs) Kind() string { return "sms.deliver" }

type ackWorker struct{ acked *atomic.Bool }

func (w *ackWorker) Work(ctx context.Context, job *keel.Job[AckArgs]) error {
	if !w.acked.Load() {
		// Waiting is not failure: the job parks without spending an attempt
		// until the acknowledgement wakes it (or the deadline passes).
		return keel.JobWait(keel.WaitExternalACK, time.Now().Add(time.Hour))
	}
	return nil
}

// Waiting for a counterpart is a state, not a failure: the job waits,
// costs no attempt, and an event wakes it.
func ExampleJobWait() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	driver, closeDB := openExample(ctx)
	defer closeDB()
	acked := &atomic.Bool{}
	workers := keel.NewWorkers()
	keel.AddWorker[AckArgs](workers, &ackWorker{acked: acked})
	client, err := keel.NewClient(driver, exampleConfig(workers))
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(context.Background())

	res, _ := client.Insert(ctx, AckArgs{MsgID: "m-1"}, &keel.InsertOpts{FlowKey: "app:42"})
	row := until(ctx, client, res.Job.ID, func(r *keeltype.JobRow) bool { return r.State == keeltype.JobStateWaiting })
	fmt.Println(row.State, row.WaitReason, "attempts spent:", row.Attempt)

	acked.Store(true) // the acknowledgement arrived
	if _, err := client.JobWake(ctx, &keel.JobWakeParams{IDs: []int64{res.Job.ID}}); err != nil {
		panic(err)
	}
	fmt.Println(settle(ctx, client, res.Job.ID).State)
	// Output:
	// waiting external_ack attempts spent: 0
	// completed
}
