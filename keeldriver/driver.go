// Package keeldriver is the storage seam between the Keel engine and a
// database. The engine speaks only these interfaces; keelpgx (PostgreSQL) and
// keelsqlite (SQLite) implement them, and keeldrivertest holds the one
// conformance suite both must pass: each driver runs keeldrivertest.Run from
// its TestConformance, and a new driver does the same.
//
// It is not a stable API for users. Its interfaces and parameter types change
// whenever the engine and its drivers need them to, without notice or a
// major version: applications and business modules speak to the engine
// through keel.Client and the types of the keel and keeltype packages (which
// the client converts to these), and open a database through keelpgx or
// keelsqlite. Only a driver's implementation, the engine and the conformance
// suite should import this package.
//
// Dialect differences are capability methods (SupportsListener), never type
// switches in the engine. Every state change after a claim is conditioned on
// the job's fence inside the statement itself: drivers never read-then-write.
package keeldriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/keelwork/keel/keeltype"
)

// ErrClosed is returned by a driver used after Close.
var ErrClosed = errors.New("keeldriver: driver closed")

// Driver is a database the engine can run on. TTx is the database's native
// transaction type (pgx.Tx, *sql.Tx), so that users can enqueue and complete
// jobs inside their own transactions.
type Driver[TTx any] interface {
	// Executor runs statements on the pool (each call its own transaction
	// unless inside ExecutorTx).
	Executor() Executor
	// UnwrapExecutor wraps a caller's transaction so engine statements run in
	// it. Commit/Rollback on the returned value are no-ops owned by the caller.
	UnwrapExecutor(tx TTx) ExecutorTx
	// UnwrapTx returns the native transaction behind an ExecutorTx that this
	// driver created with Begin.
	UnwrapTx(tx ExecutorTx) TTx

	// Dialect names the SQL dialect: "postgres" or "sqlite". Migrations and
	// modules pick their SQL files by it.
	Dialect() string
	// Migrations returns the driver's embedded engine migrations (files named
	// NNN_name.up.sql / NNN_name.down.sql).
	Migrations() fs.FS

	// SupportsListener reports whether Listener works across processes
	// (PostgreSQL LISTEN/NOTIFY). Without it, notifications are delivered only
	// within this process and other instances rely on polling.
	SupportsListener() bool
	// Listener returns a new listener; callers Close it.
	Listener() Listener
	// Notify sends payload on topic to every listener (in-process listeners
	// always; other processes when SupportsListener).
	Notify(ctx context.Context, topic string, payload string) error

	// Close releases the pool. Drivers opened from a caller's pool do not
	// close it.
	Close() error
}

// Executor is the set of engine operations. Every method is one statement or
// one short transaction; none holds locks across calls.
type Executor interface {
	FlowExecutor
	BatchExecutor

	Begin(ctx context.Context) (ExecutorTx, error)
	// Exec runs raw SQL (migrations, module SQL loaded from embedded files).
	Exec(ctx context.Context, sql string, args ...any) error

	JobInsertMany(ctx context.Context, params []*JobInsertParams) ([]JobInsertResult, error)
	JobClaim(ctx context.Context, params *JobClaimParams) ([]*keeltype.JobRow, error)
	JobHeartbeat(ctx context.Context, params *JobHeartbeatParams) ([]int64, error)
	JobFinishMany(ctx context.Context, params []*JobFinishParams) ([]JobFinishResult, error)
	JobPromote(ctx context.Context, params *JobPromoteParams) ([]string, error)
	JobRescue(ctx context.Context, params *JobRescueParams) ([]*keeltype.JobRow, error)
	JobCancel(ctx context.Context, params *JobCancelParams) (*keeltype.JobRow, error)
	JobRetry(ctx context.Context, params *JobRetryParams) (*keeltype.JobRow, error)
	JobDelete(ctx context.Context, id int64) (*keeltype.JobRow, error)
	JobWake(ctx context.Context, params *JobWakeParams) ([]int64, error)
	JobGet(ctx context.Context, id int64) (*keeltype.JobRow, error)
	JobList(ctx context.Context, params *JobListParams) ([]*keeltype.JobRow, error)
	JobPrune(ctx context.Context, params *JobPruneParams) (int, error)
	// JobFinalizedCounts counts jobs finalized in (Since, Until] by final
	// state, through the finalized_at index: the database-wide throughput
	// of every instance, not one process's counters.
	JobFinalizedCounts(ctx context.Context, params *JobFinalizedCountsParams) (map[keeltype.JobState]int64, error)

	QueuePause(ctx context.Context, params *QueuePauseParams) (*keeltype.QueueRow, error)
	QueueResume(ctx context.Context, name string) (*keeltype.QueueRow, error)
	QueueList(ctx context.Context) ([]*keeltype.QueueRow, error)
	// QueueStats counts live (not final) jobs per queue and state; final
	// rows are history, counted by metrics, not by scanning them.
	QueueStats(ctx context.Context) ([]*keeltype.QueueStats, error)

	LeaderAttemptElect(ctx context.Context, params *LeaderElectParams) (bool, error)
	LeaderResign(ctx context.Context, params *LeaderElectParams) error
	LeaderGet(ctx context.Context, name string) (*LeaderRow, error)

	AuditInsert(ctx context.Context, row *keeltype.AuditRow) (*keeltype.AuditRow, error)
	AuditList(ctx context.Context, params *AuditListParams) ([]*keeltype.AuditRow, error)

	MigrationApplied(ctx context.Context) ([]*MigrationRow, error)
	MigrationRecord(ctx context.Context, row *MigrationRow) error
	MigrationForget(ctx context.Context, line string, version int) error
	TableExists(ctx context.Context, name string) (bool, error)
}

// InsertNotifier is an optional Executor capability: insert jobs and send
// the insert notification for queues in the same round trip and the same
// transaction, so listeners are woken when the jobs commit (not before, as
// a separate notification inside a caller's transaction would) and an
// insert costs one round trip instead of two.
type InsertNotifier interface {
	JobInsertManyNotify(ctx context.Context, params []*JobInsertParams, topic string, queues []string) ([]JobInsertResult, error)
}

// InsertClaimer is an optional Executor capability: insert one job already
// claimed by Owner (state running, attempt 1, fence 1, leased for
// LeaseDuration), in one statement and one commit. The engine uses it to
// start a job its own process inserts into an idle queue without a second
// commit for the claim (Config.StartOnInsert). A paused queue takes no
// claimed insert: the method then inserts nothing and returns a nil row, and
// the caller inserts the job as usual. A job with an idempotency key, a flow
// key, a batch or a run time is refused (ErrInvalidArgument): those are
// decided at claim time.
type InsertClaimer interface {
	JobInsertClaimed(ctx context.Context, p *JobInsertClaimedParams) (*keeltype.JobRow, error)
}

// JobInsertClaimedParams: the job and its claim.
type JobInsertClaimedParams struct {
	Job           *JobInsertParams
	Owner         string
	LeaseDuration time.Duration
}

// ValidateClaimedInsert refuses what InsertClaimer may not insert.
func ValidateClaimedInsert(p *JobInsertClaimedParams) error {
	switch {
	case p == nil || p.Job == nil:
		return fmt.Errorf("%w: no job", keeltype.ErrInvalidArgument)
	case p.Owner == "":
		return fmt.Errorf("%w: no owner", keeltype.ErrInvalidArgument)
	case p.LeaseDuration <= 0:
		return fmt.Errorf("%w: lease duration %v", keeltype.ErrInvalidArgument, p.LeaseDuration)
	case p.Job.IdempotencyKey != "" || p.Job.FlowKey != "" || p.Job.BatchID != 0 || p.Job.RunAt != nil:
		return fmt.Errorf("%w: a claimed insert takes no idempotency key, flow key, batch or run time", keeltype.ErrInvalidArgument)
	}
	return nil
}

// BulkInserter is an optional Executor capability: insert jobs through the
// database's bulk load path (PostgreSQL: COPY) and report only how many
// were stored. No row comes back, so nothing is read or decoded per job;
// in exchange no job may carry an idempotency key (a duplicate could not be
// answered with the stored job) or belong to a batch. State and run_at are
// decided from now, the caller's clock: a job due at or before now is
// available, a later one scheduled. Inside a caller's transaction the
// insert notification for queues is sent in that transaction too (as
// InsertNotifier does); outside one the caller passes no queues and
// announces after the commit. Drivers without it are served by
// JobInsertMany.
type BulkInserter interface {
	JobInsertBulk(ctx context.Context, params []*JobInsertParams, now time.Time, topic string, queues []string) (int64, error)
}

// ExecutorTx is an Executor inside one transaction.
type ExecutorTx interface {
	Executor
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Listener receives notifications published with Driver.Notify.
type Listener interface {
	Connect(ctx context.Context) error
	Listen(ctx context.Context, topic string) error
	Unlisten(ctx context.Context, topic string) error
	// WaitForNotification blocks until a notification arrives or ctx ends.
	WaitForNotification(ctx context.Context) (*Notification, error)
	Close(ctx context.Context) error
}

// Notification is one message from Notify.
type Notification struct {
	Topic   string
	Payload string
}

// JobInsertParams is one job to insert. State is scheduled when RunAt is in
// the future, otherwise available (drivers decide with the database clock).
type JobInsertParams struct {
	Kind           string
	Queue          string
	Args           json.RawMessage
	Metadata       json.RawMessage // nil = {}
	Priority       int
	RunAt          *time.Time // nil = now
	MaxAttempts    int
	IdempotencyKey string // "" = none; unique per kind while the row exists
	FlowKey        string
	BatchID        int64
	Subject        string
}

// JobInsertResult is the job as stored. Duplicate is true when the
// idempotency key already existed: Job is then the original, untouched.
type JobInsertResult struct {
	Job       *keeltype.JobRow
	Duplicate bool
}

// JobClaimParams claims up to Max available jobs of Queue, skipping rows
// locked by concurrent claimers, in (priority, id) order. Each claimed job
// gets state running, attempt+1, fence+1, lease_owner = Owner,
// lease_expires_at = now + LeaseDuration, attempted_at = now. Nothing is
// claimed while the queue is paused.
type JobClaimParams struct {
	Queue         string
	Owner         string
	Max           int
	LeaseDuration time.Duration
	Now           *time.Time // nil = database clock
}

// JobHeartbeatParams extends the lease of each (ID, Fence) pair still running
// under Owner. Returns the IDs extended; a missing ID has lost its lease.
type JobHeartbeatParams struct {
	Owner         string
	IDs           []int64
	Fences        []int64
	LeaseDuration time.Duration
	Now           *time.Time
}

// JobFinishParams moves one running job, conditioned on (ID, Fence, state =
// running), to State. The lease is cleared.
//   - completed/failed/cancelled/skipped: finalized_at = now, Result stored.
//   - retryable/scheduled: run_at = RunAt.
//   - available (snooze): run_at = RunAt, AttemptDelta -1 gives the attempt back.
//   - waiting: WaitReason and WaitDeadline set, AttemptDelta -1.
//   - unknown: run_at = RunAt (when Check runs), needs_check = true.
//   - manual: dead letter.
//
// Error, when set, is appended to the error history. NeedsCheck is stored as
// given for every state (the completer clears it on success).
type JobFinishParams struct {
	ID           int64
	Fence        int64
	State        keeltype.JobState
	RunAt        *time.Time
	Result       json.RawMessage
	Error        *keeltype.AttemptError
	WaitReason   string
	WaitDeadline *time.Time
	AttemptDelta int
	NeedsCheck   bool
	Now          *time.Time
}

// JobFinishResult says whether the transition happened. When it did not
// (Stale), CurrentState/CurrentFence say why (0/"" if the job is gone).
type JobFinishResult struct {
	ID           int64
	Applied      bool
	CurrentState keeltype.JobState
	CurrentFence int64
}

// JobPromoteParams makes due work claimable: scheduled/retryable/unknown jobs
// whose run_at passed become available (unknown keeps needs_check = true), and
// waiting jobs whose deadline passed become available with their wait reason
// kept so the worker can tell. Returns the distinct queues touched.
type JobPromoteParams struct {
	Max int
	Now *time.Time
}

// JobRescueParams returns running jobs whose lease expired: to available with
// needs_check = true (the side effect may have happened) and an
// lease_expired error appended, or to manual when the attempt budget is spent.
type JobRescueParams struct {
	Max int
	Now *time.Time
}

// JobCancelParams cancels a non-final job: a non-running job becomes
// cancelled at once; a running one gets cancel_requested = true and stays
// running until its owner stops (the engine notifies the owner).
type JobCancelParams struct {
	ID  int64
	Now *time.Time
}

// JobRetryParams makes a manual, failed, cancelled, retryable, waiting,
// unknown or scheduled job available now; the attempt budget is extended by
// one if spent. Running and completed jobs are refused.
type JobRetryParams struct {
	ID  int64
	Now *time.Time
}

// JobWakeParams wakes waiting jobs: by IDs, or by FlowKey (and WaitReason if
// set). With IDs, a set FlowKey or WaitReason narrows them: a job named but
// waiting under another key or reason stays waiting. Woken jobs become
// available with wait reason cleared; their IDs come back sorted.
type JobWakeParams struct {
	IDs        []int64
	FlowKey    string
	WaitReason string
	Now        *time.Time
}

// JobListParams filters and pages jobs in id order. Cursor paging: AfterID
// (ascending) or BeforeID (descending, newest first when Desc).
type JobListParams struct {
	States   []keeltype.JobState
	Kinds    []string
	Queues   []string
	FlowKey  string
	BatchID  int64
	AfterID  int64 // ascending pages: id > AfterID
	BeforeID int64 // descending pages: id < BeforeID (0 = from the newest)
	Desc     bool
	Limit    int
}

// JobFinalizedCountsParams: see Executor.JobFinalizedCounts.
type JobFinalizedCountsParams struct {
	Since, Until time.Time
}

// JobPruneParams deletes up to Max final jobs finalized before Before.
type JobPruneParams struct {
	Before time.Time
	Max    int
}

// QueuePauseParams pauses a queue; claims stop on every instance at the next
// claim statement because the claim itself checks the queue row.
type QueuePauseParams struct {
	Name string
	By   string
	Now  *time.Time
}

// LeaderElectParams elects or re-elects LeaderID for Name for TTL. Elect
// succeeds when no leader holds an unexpired lease or when LeaderID already
// does (re-election extends it).
type LeaderElectParams struct {
	Name     string
	LeaderID string
	TTL      time.Duration
	Now      *time.Time
}

// LeaderRow is the current leadership lease.
type LeaderRow struct {
	Name      string
	LeaderID  string
	ElectedAt time.Time
	ExpiresAt time.Time
}

// AuditListParams filters and pages the audit log, newest first. Since and
// Until bound At inclusively.
type AuditListParams struct {
	Actor    string
	Action   string // prefix match: "queue." lists every queue action
	Target   string
	Since    *time.Time
	Until    *time.Time
	BeforeID int64
	Limit    int
}

// MigrationRow records one applied migration of a line.
type MigrationRow struct {
	Line      string
	Version   int
	Name      string
	AppliedAt time.Time
}
