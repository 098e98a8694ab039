// Package keeldrivertest is the conformance suite of the storage seam: the
// behaviour of keeldriver.Driver that the engine relies on, written once and
// run by every driver against a real database of its kind.
//
// A driver runs it from one test in its external test package (internal/testdb
// imports the drivers), with a Harness that opens a fresh, migrated database
// per call:
//
//	func TestConformance(t *testing.T) {
//		keeldrivertest.Run(t, keeldrivertest.Harness[pgx.Tx]{
//			Open: func(t *testing.T) keeldriver.Driver[pgx.Tx] { return testdb.NewPostgres(t) },
//			BeginTx: func(ctx context.Context, d keeldriver.Driver[pgx.Tx]) (pgx.Tx, error) {
//				return d.(*keelpgx.Driver).Pool().Begin(ctx)
//			},
//			EndTx:    ..., // tx.Commit(ctx) or tx.Rollback(ctx)
//			QueryRow: ..., // Pool().QueryRow(ctx, query).Scan(dest...)
//		})
//	}
//
// Every behaviour is a subtest (TestConformance/FinishFenced, ...) on its
// own database, so subtests run in parallel and a failure names what broke.
// Times are passed explicitly (the Now fields of the params) wherever the
// contract accepts them, so nothing sleeps to move a clock. What is truly
// dialect-specific (query plans, LISTEN across schemas, SQLite's single
// writer) stays in the driver's own tests.
//
// The package imports only keeldriver, keeltype and the standard library:
// drivers import it from their tests, so it can import none of them.
package keeldrivertest

import (
	"context"
	"io/fs"
	"reflect"
	"testing"

	"github.com/keelwork/keel/keeldriver"
)

// Harness is what a driver supplies to Run. Every field is required.
type Harness[TTx any] struct {
	// Open returns a driver on a fresh database with the engine migrations
	// applied, closed when t ends. Subtests call it in parallel.
	Open func(t *testing.T) keeldriver.Driver[TTx]
	// BeginTx opens a transaction on d's own pool the way an application
	// does (not through the Executor), to hand to UnwrapExecutor.
	BeginTx func(ctx context.Context, d keeldriver.Driver[TTx]) (TTx, error)
	// EndTx commits tx (commit true) or rolls it back.
	EndTx func(ctx context.Context, tx TTx, commit bool) error
	// QueryRow runs a one-row query without parameters on d's pool and scans
	// it into dest (*int64, *string). It reads stored columns no Executor
	// method returns (base_priority, the ramp column); the suite writes such
	// queries in SQL both dialects accept.
	QueryRow func(ctx context.Context, d keeldriver.Driver[TTx], query string, dest ...any) error
}

// Run runs the conformance suite against the driver h opens.
func Run[TTx any](t *testing.T, h Harness[TTx]) {
	t.Helper()
	if h.Open == nil || h.BeginTx == nil || h.EndTx == nil || h.QueryRow == nil {
		t.Fatal("keeldrivertest: Harness needs Open, BeginTx, EndTx and QueryRow")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newEnv(t, h))
		})
	}
}

// cases is the suite, in the order of the seam: jobs, queues and the rest
// of the executor, transactions and notifications, flow control.
var cases = []struct {
	name string
	run  func(*testing.T, *env)
}{
	{"Insert", testInsert},
	{"ClaimOrderFenceAttempt", testClaimOrderFenceAttempt},
	{"ClaimConcurrentNeverDuplicates", testClaimConcurrent},
	{"PausedQueueClaimsNothing", testPausedQueue},
	{"FinishFenced", testFinishFenced},
	{"FinishSnoozeAndWait", testFinishSnoozeAndWait},
	{"Heartbeat", testHeartbeat},
	{"Promote", testPromote},
	{"Rescue", testRescue},
	{"Cancel", testCancel},
	{"Retry", testRetry},
	{"Delete", testDelete},
	{"Wake", testWake},
	{"JobList", testJobList},
	{"Prune", testPrune},
	{"JobFinalizedCounts", testFinalizedCounts},
	{"QueueListAndStats", testQueueListAndStats},
	{"LeaderElection", testLeaderElection},
	{"LeaderElectionConcurrent", testLeaderElectionConcurrent},
	{"Audit", testAudit},
	{"Migrations", testMigrations},
	{"Close", testClose},
	{"Transactions", testTransactions},
	{"CallerTransaction", testCallerTransaction},
	{"ListenNotify", testListenNotify},
	{"InsertNotifier", testInsertNotifier},
	{"InsertClaimed", testInsertClaimed},
	{"FlowKeysAvailable", testFlowKeysAvailable},
	{"JobClaimKeys", testJobClaimKeys},
	{"JobClaimKeysGates", testJobClaimKeysGates},
	{"JobClaimKeysPausedQueueAndTx", testJobClaimKeysPausedQueueAndTx},
	{"JobClaimKeysConcurrentDisjoint", testJobClaimKeysConcurrent},
	{"FlowKeysLock", testFlowKeysLock},
	{"FlowKeysSaveAndRead", testFlowKeysSave},
	{"FlowKeyList", testFlowKeyList},
	{"FlowKeyListPatterns", testFlowKeyListPatterns},
	{"FlowKeyStats", testFlowKeyStats},
	{"FlowLimits", testFlowLimits},
	{"JobAgePriorities", testJobAgePriorities},
	{"JobAgePrioritiesLevels", testJobAgePrioritiesLevels},
}

// driver is the part of keeldriver.Driver that does not name the
// transaction type, so that the tests need not be generic.
type driver interface {
	Executor() keeldriver.Executor
	Dialect() string
	Migrations() fs.FS
	SupportsListener() bool
	Listener() keeldriver.Listener
	Notify(ctx context.Context, topic string, payload string) error
	Close() error
}

// env is one subtest's database.
type env struct {
	d  driver
	ex keeldriver.Executor
	// callerTx opens a transaction as an application does and wraps it with
	// UnwrapExecutor.
	callerTx func(ctx context.Context) (*callerTx, error)
	// rewrap wraps the native transaction behind an ExecutorTx from Begin
	// (UnwrapTx) with UnwrapExecutor; ok is false if UnwrapTx gave none.
	rewrap   func(tx keeldriver.ExecutorTx) (ex keeldriver.ExecutorTx, ok bool)
	queryRow func(ctx context.Context, query string, dest ...any) error
}

// callerTx is an application's transaction with the engine inside it.
type callerTx struct {
	ex keeldriver.ExecutorTx
	// unwrapped is true when UnwrapTx(ex) gave back the caller's tx.
	unwrapped bool
	end       func(ctx context.Context, commit bool) error
}

func newEnv[TTx any](t *testing.T, h Harness[TTx]) *env {
	t.Helper()
	d := h.Open(t)
	if d == nil {
		t.Fatal("keeldrivertest: Harness.Open returned nil")
	}
	return &env{
		d:  d,
		ex: d.Executor(),
		callerTx: func(ctx context.Context) (*callerTx, error) {
			tx, err := h.BeginTx(ctx, d)
			if err != nil {
				return nil, err
			}
			ex := d.UnwrapExecutor(tx)
			return &callerTx{
				ex:        ex,
				unwrapped: sameValue(d.UnwrapTx(ex), tx),
				end:       func(ctx context.Context, commit bool) error { return h.EndTx(ctx, tx, commit) },
			}, nil
		},
		rewrap: func(etx keeldriver.ExecutorTx) (keeldriver.ExecutorTx, bool) {
			tx := d.UnwrapTx(etx)
			if reflect.ValueOf(&tx).Elem().IsZero() {
				return nil, false
			}
			return d.UnwrapExecutor(tx), true
		},
		queryRow: func(ctx context.Context, query string, dest ...any) error {
			return h.QueryRow(ctx, d, query, dest...)
		},
	}
}

// sameValue reports whether a and b are the same transaction (native
// transaction types are pointers or interfaces holding pointers).
func sameValue[T any](a, b T) bool {
	va, vb := reflect.ValueOf(any(a)), reflect.ValueOf(any(b))
	if !va.IsValid() || !vb.IsValid() || va.Type() != vb.Type() || !va.Comparable() {
		return false
	}
	return va.Equal(vb)
}
