package keel

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// Notification topics. Payloads: insert → queue name, or queue name, a
// space and the announcing client's ID (see insertPayload); control →
// "cancel:<id>" or "queue:<name>".
const (
	topicInsert  = "insert"
	topicControl = "control"
)

// insertPayload tags an insert notification with the client that sent it
// after waking its own producers, so its listener does not wake them a
// second time: at 1,000 single inserts/s the echo doubled the claims, and
// the empty ones cost PostgreSQL as much CPU as the useful ones. Queue names
// have no spaces, so the first space ends the name whatever the ID holds.
// An instance of an earlier version reads the whole payload as a queue name
// and ignores it, so during a rolling upgrade its fetchers fall back to
// polling for jobs that newer instances insert; nothing is lost.
func insertPayload(queue, sender string) string { return queue + " " + sender }

type actorKey struct{}

// WithActor names who performs the control actions made with ctx
// ("user:alice", "token:deploy-bot"); they are audited under that name.
// Without it the actor is "system".
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor set with WithActor, or "system".
func ActorFrom(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "system"
}

// Audit describes a control action for the audit log.
type Audit struct {
	Action  string
	Target  string
	Reason  string
	Context map[string]any
}

// MaxAuditReason bounds an audit entry's reason (in characters): reasons
// are for people, and an unbounded one would let any caller bloat the log.
const MaxAuditReason = 1000

// check refuses an entry the log cannot keep as given.
func (a *Audit) check() error {
	if a.Action == "" {
		return fmt.Errorf("%w: audit entry without an action", keeltype.ErrInvalidArgument)
	}
	if n := utf8.RuneCountInString(a.Reason); n > MaxAuditReason {
		return fmt.Errorf("%w: reason is %d characters; at most %d", keeltype.ErrInvalidArgument, n, MaxAuditReason)
	}
	return nil
}

// inAuditedTx runs action and its audit row in one transaction, so an action
// is never committed without its audit entry (and vice versa).
func (c *Client[TTx]) inAuditedTx(ctx context.Context, a Audit, action func(exec keeldriver.Executor) error) error {
	if err := a.check(); err != nil {
		return err
	}
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning %s: %w", a.Action, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := action(tx); err != nil {
		return err
	}
	if _, err := tx.AuditInsert(ctx, auditRow(ctx, a)); err != nil {
		return fmt.Errorf("auditing %s: %w", a.Action, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing %s: %w", a.Action, err)
	}
	return nil
}

func auditRow(ctx context.Context, a Audit) *keeltype.AuditRow {
	raw, err := json.Marshal(a.Context)
	if err != nil || a.Context == nil {
		raw = json.RawMessage(`{}`)
	}
	return &keeltype.AuditRow{Actor: ActorFrom(ctx), Action: a.Action, Target: a.Target, Reason: a.Reason, Context: raw}
}

// AuditRecord writes an audit entry for an action taken outside the engine
// (a module's operator action). Prefer doing it in the action's transaction
// with AuditRecordTx.
func (c *Client[TTx]) AuditRecord(ctx context.Context, a Audit) error {
	if err := a.check(); err != nil {
		return err
	}
	_, err := c.driver.Executor().AuditInsert(ctx, auditRow(ctx, a))
	return err
}

// AuditRecordTx writes an audit entry inside the caller's transaction.
func (c *Client[TTx]) AuditRecordTx(ctx context.Context, tx TTx, a Audit) error {
	if err := a.check(); err != nil {
		return err
	}
	_, err := c.driver.UnwrapExecutor(tx).AuditInsert(ctx, auditRow(ctx, a))
	return err
}

// AuditList reads the audit log, newest first.
func (c *Client[TTx]) AuditList(ctx context.Context, params *AuditListParams) ([]*keeltype.AuditRow, error) {
	return c.driver.Executor().AuditList(ctx, params.driverParams())
}

// JobGet returns one job.
func (c *Client[TTx]) JobGet(ctx context.Context, id int64) (*keeltype.JobRow, error) {
	return c.driver.Executor().JobGet(ctx, id)
}

// JobList lists jobs with filters and cursor paging.
func (c *Client[TTx]) JobList(ctx context.Context, params *JobListParams) ([]*keeltype.JobRow, error) {
	return c.driver.Executor().JobList(ctx, params.driverParams())
}

// JobCancel cancels a job. A running job is flagged and its owner, on any
// instance, is told to cancel its context; it ends cancelled when its worker
// returns.
func (c *Client[TTx]) JobCancel(ctx context.Context, id int64, reason string) (*keeltype.JobRow, error) {
	var row *keeltype.JobRow
	err := c.inAuditedTx(ctx, jobAudit("job.cancel", id, reason), func(exec keeldriver.Executor) error {
		var err error
		row, err = exec.JobCancel(ctx, &keeldriver.JobCancelParams{ID: id})
		return err
	})
	if err != nil {
		return nil, err
	}
	if row.State == keeltype.JobStateRunning {
		c.notifyControl(ctx, "cancel:"+strconv.FormatInt(id, 10))
	}
	return row, nil
}

// JobRetry makes a manual, failed or otherwise parked job available now.
func (c *Client[TTx]) JobRetry(ctx context.Context, id int64, reason string) (*keeltype.JobRow, error) {
	var row *keeltype.JobRow
	err := c.inAuditedTx(ctx, jobAudit("job.retry", id, reason), func(exec keeldriver.Executor) error {
		var err error
		row, err = exec.JobRetry(ctx, &keeldriver.JobRetryParams{ID: id})
		return err
	})
	if err != nil {
		return nil, err
	}
	_ = c.driver.Notify(ctx, topicInsert, row.Queue)
	return row, nil
}

// JobDelete deletes a job that is not running.
func (c *Client[TTx]) JobDelete(ctx context.Context, id int64, reason string) (*keeltype.JobRow, error) {
	var row *keeltype.JobRow
	err := c.inAuditedTx(ctx, jobAudit("job.delete", id, reason), func(exec keeldriver.Executor) error {
		var err error
		row, err = exec.JobDelete(ctx, id)
		return err
	})
	return row, err
}

// JobWake makes waiting jobs available now (an awaited event happened).
// Waking is not a control action and is not audited.
func (c *Client[TTx]) JobWake(ctx context.Context, params *JobWakeParams) ([]int64, error) {
	ids, err := c.driver.Executor().JobWake(ctx, params.driverParams())
	if err != nil {
		return nil, fmt.Errorf("waking jobs: %w", err)
	}
	if len(ids) > 0 {
		for q := range c.config.Queues {
			_ = c.driver.Notify(ctx, topicInsert, q)
		}
	}
	return ids, nil
}

// JobFinalizedCounts counts jobs finalized in (since, until] by final
// state, across every instance (the console's throughput chart).
func (c *Client[TTx]) JobFinalizedCounts(ctx context.Context, since, until time.Time) (map[keeltype.JobState]int64, error) {
	counts, err := c.driver.Executor().JobFinalizedCounts(ctx, &keeldriver.JobFinalizedCountsParams{Since: since, Until: until})
	if err != nil {
		return nil, fmt.Errorf("counting finalized jobs: %w", err)
	}
	return counts, nil
}

// Ping checks that the database answers and holds Keel's tables, with a
// catalogue lookup that costs the same whatever the backlog (readiness
// probes call it every few seconds).
func (c *Client[TTx]) Ping(ctx context.Context) error {
	ok, err := c.driver.Executor().TableExists(ctx, "keel_job")
	if err != nil {
		return fmt.Errorf("pinging the database: %w", err)
	}
	if !ok {
		return fmt.Errorf("pinging the database: %w: keel_job is missing (migrations not applied)", keeltype.ErrInvalidState)
	}
	return nil
}

// WakeQueue makes this client's fetchers of queue look for work now rather
// than at their next poll (after QueueConfig.FlowKeys grew, say). Other
// instances are not told; it is a local nudge, not a notification.
func (c *Client[TTx]) WakeQueue(queue string) { c.wakeLocal(queue) }

// wakeLocal wakes this client's producer of queue, if it runs one.
func (c *Client[TTx]) wakeLocal(queue string) { c.withProducer(queue, (*producer).wake) }

// withProducer calls f on this client's producer of queue, if it runs one.
func (c *Client[TTx]) withProducer(queue string, f func(*producer)) {
	c.mu.Lock()
	p := c.producers[queue]
	c.mu.Unlock()
	if p != nil {
		f(p)
	}
}

// QueuePause stops claims from queue on every instance: the claim statement
// itself checks the queue row, so the pause holds from its commit on.
func (c *Client[TTx]) QueuePause(ctx context.Context, queue, reason string) (*keeltype.QueueRow, error) {
	if err := c.queueKnown(ctx, queue); err != nil {
		return nil, err
	}
	var row *keeltype.QueueRow
	err := c.inAuditedTx(ctx, Audit{Action: "queue.pause", Target: "queue:" + queue, Reason: reason},
		func(exec keeldriver.Executor) error {
			var err error
			row, err = exec.QueuePause(ctx, &keeldriver.QueuePauseParams{Name: queue, By: ActorFrom(ctx)})
			return err
		})
	if err == nil {
		c.notifyControl(ctx, "queue:"+queue)
	}
	return row, err
}

// QueueResume resumes a paused queue.
func (c *Client[TTx]) QueueResume(ctx context.Context, queue, reason string) (*keeltype.QueueRow, error) {
	if err := c.queueKnown(ctx, queue); err != nil {
		return nil, err
	}
	var row *keeltype.QueueRow
	err := c.inAuditedTx(ctx, Audit{Action: "queue.resume", Target: "queue:" + queue, Reason: reason},
		func(exec keeldriver.Executor) error {
			var err error
			row, err = exec.QueueResume(ctx, queue)
			return err
		})
	if err == nil {
		_ = c.driver.Notify(ctx, topicInsert, queue)
	}
	return row, err
}

// QueueList lists queues with persisted control state.
func (c *Client[TTx]) QueueList(ctx context.Context) ([]*keeltype.QueueRow, error) {
	return c.driver.Executor().QueueList(ctx)
}

// QueueStats returns depth by state and oldest available age per queue.
func (c *Client[TTx]) QueueStats(ctx context.Context) ([]*keeltype.QueueStats, error) {
	return c.driver.Executor().QueueStats(ctx)
}

func jobAudit(action string, id int64, reason string) Audit {
	return Audit{Action: action, Target: "job:" + strconv.FormatInt(id, 10), Reason: reason}
}

func (c *Client[TTx]) notifyControl(ctx context.Context, payload string) {
	if err := c.driver.Notify(ctx, topicControl, payload); err != nil {
		c.logger.Warn("control notification failed", "payload", payload, "error", err)
	}
}
