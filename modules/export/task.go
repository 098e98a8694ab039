package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// Task states.
const (
	StateRunning     = "running"
	StateMerging     = "merging"
	StateSucceeded   = "succeeded"
	StateFailed      = "failed"
	StateCancelled   = "cancelled"
	StateQuarantined = "quarantined"
)

// Permissions a user holds per tenant.
const (
	PermExport = "orders.export" // may export orders at all
	PermAmount = "orders.amount" // may see the amount column
)

// Stable problem codes of the API (and sentences of the CLI).
const (
	CodeUnknownColumn     = "export.unknown_column"
	CodeUnknownFilter     = "export.unknown_filter"
	CodeForbidden         = "export.permission_missing"
	CodeTooLarge          = "export.too_large"
	CodeUnsupportedFormat = "export.unsupported_format"
	CodeUserBusy          = "export.user_inflight"
	CodeTenantBusy        = "export.tenant_inflight"
	CodeNotReady          = "export.not_ready"
)

func init() {
	web.Register(CodeUnknownColumn, http.StatusBadRequest, "Unknown export column")
	web.Register(CodeUnknownFilter, http.StatusBadRequest, "Unknown export filter")
	web.Register(CodeForbidden, http.StatusForbidden, "Export permission missing")
	web.Register(CodeTooLarge, http.StatusUnprocessableEntity, "Export larger than allowed")
	web.Register(CodeUnsupportedFormat, http.StatusBadRequest, "Export format not supported")
	web.Register(CodeUserBusy, http.StatusTooManyRequests, "Too many exports running for the user")
	web.Register(CodeTenantBusy, http.StatusTooManyRequests, "Too many exports running for the tenant")
	web.Register(CodeNotReady, http.StatusConflict, "Export file not ready")
}

// Columns of the orders source, in their default order.
var Columns = []string{"id", "order_no", "customer", "amount_minor", "currency", "status", "created_at"}

// Filters the orders source accepts.
var Filters = []string{"status", "created_from", "created_to"}

// Request asks for an export.
type Request struct {
	Tenant  string            `json:"tenant"`
	Columns []string          `json:"columns,omitempty"`
	Filters map[string]string `json:"filters,omitempty"`
	Format  string            `json:"format,omitempty"` // csv (default) or xlsx
	Gzip    bool              `json:"gzip,omitempty"`
	BOM     bool              `json:"bom,omitempty"` // UTF-8 byte order mark, for Excel
	// NewVersion asks for a new task even when the same request is within
	// its idempotency window.
	NewVersion bool `json:"new_version,omitempty"`
}

// Params are a request's normalized parameters: what the idempotency key
// and the shards read.
type Params struct {
	Columns []string  `json:"columns"`
	Status  string    `json:"status"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Format  string    `json:"format"`
	Gzip    bool      `json:"gzip"`
	BOM     bool      `json:"bom"`
}

var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// normalize validates a request before anything is written.
func normalize(r Request) (Params, error) {
	p := Params{Format: strings.ToLower(strings.TrimSpace(r.Format)), Gzip: r.Gzip, BOM: r.BOM, From: minTime, To: maxTime}
	if p.Format == "" {
		p.Format = "csv"
	}
	if p.Format != "csv" && p.Format != "xlsx" {
		return p, module.Errorf(http.StatusBadRequest, CodeUnsupportedFormat, "format %q is not supported: use csv or xlsx", r.Format)
	}
	if strings.TrimSpace(r.Tenant) == "" {
		return p, module.Invalid("tenant is required")
	}
	cols := r.Columns
	if len(cols) == 0 {
		cols = Columns
	}
	for _, c := range cols {
		c = strings.TrimSpace(c)
		if !slices.Contains(Columns, c) {
			return p, module.Errorf(http.StatusBadRequest, CodeUnknownColumn, "column %q is unknown: the columns are %s", c, strings.Join(Columns, ", "))
		}
		if !slices.Contains(p.Columns, c) {
			p.Columns = append(p.Columns, c)
		}
	}
	keys := make([]string, 0, len(r.Filters))
	for k := range r.Filters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(r.Filters[k])
		switch k {
		case "status":
			if v != "" && !slices.Contains([]string{"paid", "shipped", "refunded"}, v) {
				return p, module.Invalid("filter status must be paid, shipped or refunded, not %q", v)
			}
			p.Status = v
		case "created_from", "created_to":
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return p, module.Invalid("filter %s must be an RFC 3339 time such as 2030-01-07T00:00:00Z", k)
			}
			if k == "created_from" {
				p.From = t.UTC()
			} else {
				p.To = t.UTC()
			}
		default:
			return p, module.Errorf(http.StatusBadRequest, CodeUnknownFilter, "filter %q is unknown: the filters are %s", k, strings.Join(Filters, ", "))
		}
	}
	if !p.From.Before(p.To) {
		return p, module.Invalid("created_from must be before created_to")
	}
	return p, nil
}

func (p Params) digest() (string, string) {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return string(b), hex.EncodeToString(sum[:16])
}

// Task is an export task as stored.
type Task struct {
	ID            int64      `json:"id"`
	Tenant        string     `json:"tenant"`
	User          string     `json:"user"`
	Params        Params     `json:"params"`
	Permissions   []string   `json:"permissions"`
	DataVersion   int64      `json:"data_version"`
	IdemKey       string     `json:"idempotency_key"`
	Format        string     `json:"format"`
	Gzip          bool       `json:"gzip"`
	BOM           bool       `json:"bom"`
	RangeLo       int64      `json:"range_lo"`
	RangeHi       int64      `json:"range_hi"`
	EstimatedRows int64      `json:"estimated_rows"`
	ShardCount    int        `json:"shard_count"`
	ShardsDone    int        `json:"shards_done"`
	RowsDone      int64      `json:"rows_done"`
	State         string     `json:"state"`
	MergeGen      int        `json:"merge_generation"`
	ObjectKey     string     `json:"object_key,omitempty"`
	ObjectSHA256  string     `json:"object_sha256,omitempty"`
	ObjectBytes   int64      `json:"object_bytes,omitempty"`
	ObjectRows    int64      `json:"object_rows,omitempty"`
	Verdict       string     `json:"verdict,omitempty"`
	VerdictDetail string     `json:"verdict_detail,omitempty"`
	NoticeState   string     `json:"notice_state,omitempty"`
	Error         string     `json:"error,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	// Existing is set on a create that returned an existing task.
	Existing bool `json:"existing,omitempty"`
}

// Progress is the fraction of the cut's rows committed, 0..1.
func (t *Task) Progress() float64 {
	if t.State == StateSucceeded {
		return 1
	}
	if t.EstimatedRows == 0 {
		return 0
	}
	return min(1, float64(t.RowsDone)/float64(t.EstimatedRows))
}

// Shard is one shard as stored.
type Shard struct {
	No           int       `json:"shard"`
	Lo           int64     `json:"lo"`
	Hi           int64     `json:"hi"`
	State        string    `json:"state"`
	JobID        int64     `json:"job_id"`
	Fence        int64     `json:"fence"`
	Owner        string    `json:"owner"`
	Cursor       int64     `json:"cursor"`
	Rows         int64     `json:"rows"`
	Bytes        int64     `json:"bytes"`
	Chunks       int       `json:"chunks"`
	SHA256       string    `json:"sha256"`
	StaleRefused int       `json:"stale_refused"`
	Settled      string    `json:"settled"`
	Note         string    `json:"note"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// ShardArgs is the engine job of one shard.
type ShardArgs struct {
	TaskID int64 `json:"task_id"`
	Shard  int   `json:"shard"`
}

// Kind implements keel.JobArgs.
func (ShardArgs) Kind() string { return "export.shard" }

// MergeArgs is the engine job of one merge generation.
type MergeArgs struct {
	TaskID int64 `json:"task_id"`
	Gen    int   `json:"gen"`
}

// Kind implements keel.JobArgs.
func (MergeArgs) Kind() string { return "export.merge" }

// CleanArgs is the orphan cleaner's periodic job.
type CleanArgs struct{}

// Kind implements keel.JobArgs.
func (CleanArgs) Kind() string { return "export.orphans" }

func flowKey(tenant string) string { return "export:" + tenant }

// Create makes an export task for the actor in ctx, or returns the task the
// same request made within the idempotency window. Everything is checked
// before anything is written.
func (m *Module[TTx]) Create(ctx context.Context, r Request) (*Task, error) {
	c, err := m.Client()
	if err != nil {
		return nil, err
	}
	user := keel.ActorFrom(ctx)
	if user == "" {
		return nil, module.Invalid("no user: the request carries no actor")
	}
	p, err := normalize(r)
	if err != nil {
		return nil, err
	}
	perms, err := m.Grants(ctx, r.Tenant, user)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(perms, PermExport) {
		return nil, module.Errorf(http.StatusForbidden, CodeForbidden, "user %s lacks permission %s in tenant %s", user, PermExport, r.Tenant)
	}
	if slices.Contains(p.Columns, "amount_minor") && !slices.Contains(perms, PermAmount) {
		return nil, module.Errorf(http.StatusForbidden, CodeForbidden, "user %s lacks permission %s needed for column amount_minor", user, PermAmount)
	}
	params, digest := p.digest()
	now := m.Now()
	if !r.NewVersion && m.set.window > 0 {
		var id int64
		err := m.DB.QueryRow(ctx, m.q.Get("TaskFindRecent"), r.Tenant, user, digest, now.Add(-m.set.window)).Scan(&id)
		if err == nil {
			t, err := m.Task(ctx, id)
			if err == nil {
				t.Existing = true
			}
			return t, err
		}
		if !errors.Is(err, keelsql.ErrNoRows) {
			return nil, fmt.Errorf("export: finding a recent task: %w", err)
		}
	}
	permJSON, _ := json.Marshal(perms)
	var taskID int64
	var existing bool
	err = m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		// The in-flight caps first, as the transaction's first statement:
		// it holds the tenant's lock row until commit, so a racing request
		// counts after this one's task is visible (or refused).
		if err := m.holdSlot(ctx, tx, r.Tenant, user); err != nil {
			return err
		}
		// The cut: the data version committed now. Changes after it take
		// larger versions and are invisible to this task.
		var version, count, lo, hi int64
		if err := tx.QueryRow(ctx, m.q.Get("VersionCurrent")).Scan(&version); err != nil {
			return fmt.Errorf("reading the data version: %w", err)
		}
		if err := tx.QueryRow(ctx, m.q.Get("CutStats"), r.Tenant, version, p.Status, p.From, p.To).Scan(&count, &lo, &hi); err != nil {
			return fmt.Errorf("sizing the cut: %w", err)
		}
		if count > int64(m.set.maxRows) {
			return module.Errorf(http.StatusUnprocessableEntity, CodeTooLarge, "the export would have %d rows, more than the %d allowed: narrow the filters", count, m.set.maxRows)
		}
		base := fmt.Sprintf("%s|%s|%s|v%d", r.Tenant, user, digest, version)
		rev := int64(0)
		if r.NewVersion {
			if err := tx.QueryRow(ctx, m.q.Get("TaskCountKey"), base+"|%").Scan(&rev); err != nil {
				return fmt.Errorf("counting versions: %w", err)
			}
		}
		key := fmt.Sprintf("%s|%d", base, rev)
		shards := plan(lo, hi, count, m.set.shardRows)
		rangeLo := lo - 1
		if count == 0 {
			rangeLo, hi = 0, 0
		}
		err := tx.QueryRow(ctx, m.q.Get("TaskInsert"), r.Tenant, user, params, digest, string(permJSON), version, key,
			p.Format, p.Gzip, p.BOM, rangeLo, hi, count, len(shards), StateRunning, now).Scan(&taskID)
		if errors.Is(err, keelsql.ErrNoRows) {
			// A concurrent identical request won: return its task.
			existing = true
			return tx.QueryRow(ctx, m.q.Get("TaskByIdem"), key).Scan(&taskID)
		}
		if err != nil {
			return fmt.Errorf("inserting the task: %w", err)
		}
		for i, s := range shards {
			if _, err := tx.Exec(ctx, m.q.Get("ShardInsert"), taskID, i, s[0], s[1], now); err != nil {
				return fmt.Errorf("inserting shard %d: %w", i, err)
			}
			res, err := c.InsertTx(ctx, tx.Native(), ShardArgs{TaskID: taskID, Shard: i}, &keel.InsertOpts{
				Queue: QueueShards, FlowKey: flowKey(r.Tenant), MaxAttempts: 20,
				IdempotencyKey: fmt.Sprintf("export-shard:%d:%d", taskID, i)})
			if err != nil {
				return fmt.Errorf("inserting the job of shard %d: %w", i, err)
			}
			if _, err := tx.Exec(ctx, m.q.Get("ShardSetJob"), taskID, i, res.Job.ID); err != nil {
				return err
			}
		}
		if len(shards) == 0 {
			// Nothing to read: straight to the merge (an empty file).
			if _, err := tx.Exec(ctx, "UPDATE export_tasks SET state = 'merging' WHERE id = "+m.ph(1), taskID); err != nil {
				return err
			}
			if _, err := c.InsertTx(ctx, tx.Native(), MergeArgs{TaskID: taskID, Gen: 1}, &keel.InsertOpts{
				Queue: QueueMerge, IdempotencyKey: fmt.Sprintf("export-merge:%d:1", taskID)}); err != nil {
				return err
			}
		}
		return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "export.create", Target: fmt.Sprintf("export:%d", taskID),
			Reason: reasonRequested, Context: map[string]any{"tenant": r.Tenant, "rows": count, "format": p.Format}})
	})
	if err != nil {
		return nil, err
	}
	m.refreshKeys(ctx)
	c.WakeQueue(QueueShards)
	t, err := m.Task(ctx, taskID)
	if err == nil {
		t.Existing = existing
	}
	return t, err
}

// holdSlot locks the tenant's in-flight row for the rest of tx and counts
// the running exports of the user and of the tenant: a request over either
// cap is refused and its transaction writes nothing. Ending a task (done,
// failed, cancelled) frees its slot by its state alone, so nothing that
// ends a task takes this lock: a cancel never waits for a request to end.
func (m *Module[TTx]) holdSlot(ctx context.Context, tx keelsql.Tx[TTx], tenant, user string) error {
	if _, err := tx.Exec(ctx, m.q.Get("CapLock"), "tenant:"+tenant); err != nil {
		return fmt.Errorf("export: locking the in-flight count of tenant %s: %w", tenant, err)
	}
	var n int64
	if err := tx.QueryRow(ctx, m.q.Get("InflightUser"), tenant, user).Scan(&n); err != nil {
		return fmt.Errorf("export: counting in-flight exports: %w", err)
	}
	if n >= int64(m.set.userCap) {
		m.count("refused_user_inflight")
		return module.Errorf(http.StatusTooManyRequests, CodeUserBusy, "user %s already has %d exports running in tenant %s (at most %d): wait for one to finish or cancel one", user, n, tenant, m.set.userCap)
	}
	if err := tx.QueryRow(ctx, m.q.Get("InflightTenant"), tenant).Scan(&n); err != nil {
		return fmt.Errorf("export: counting in-flight exports: %w", err)
	}
	if n >= int64(m.set.tenantCap) {
		m.count("refused_tenant_inflight")
		return module.Errorf(http.StatusTooManyRequests, CodeTenantBusy, "tenant %s already has %d exports running (at most %d): wait for one to finish", tenant, n, m.set.tenantCap)
	}
	return nil
}

// ph is the dialect's placeholder n.
func (m *Module[TTx]) ph(n int) string {
	if m.DB.Dialect() == "postgres" {
		return fmt.Sprintf("$%d", n)
	}
	return fmt.Sprintf("?%d", n)
}

// plan splits the cut's id span [lo, hi] into shards of about rows ids
// each: stable key ranges (lo, hi] that do not depend on later changes.
func plan(lo, hi, count int64, rows int) [][2]int64 {
	if count == 0 {
		return nil
	}
	span := hi - lo + 1
	n := (count + int64(rows) - 1) / int64(rows)
	step := (span + n - 1) / n
	var out [][2]int64
	for from := lo - 1; from < hi; from += step {
		out = append(out, [2]int64{from, min(from+step, hi)})
	}
	return out
}

// Task reads one task.
func (m *Module[TTx]) Task(ctx context.Context, id int64) (*Task, error) {
	var t Task
	var params, perms string
	err := m.DB.QueryRow(ctx, m.q.Get("TaskGet"), id).Scan(&t.ID, &t.Tenant, &t.User, &params, &perms, &t.DataVersion,
		&t.IdemKey, &t.Format, &t.Gzip, &t.BOM, &t.RangeLo, &t.RangeHi, &t.EstimatedRows, &t.ShardCount, &t.ShardsDone,
		&t.RowsDone, &t.State, &t.MergeGen, &t.ObjectKey, &t.ObjectSHA256, &t.ObjectBytes, &t.ObjectRows, &t.Verdict,
		&t.VerdictDetail, &t.NoticeState, &t.Error, &t.CreatedAt, &t.UpdatedAt, &t.FinishedAt)
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil, web.NotFound("no export task %d", id)
	}
	if err != nil {
		return nil, fmt.Errorf("export: reading task %d: %w", id, err)
	}
	if err := json.Unmarshal([]byte(params), &t.Params); err != nil {
		return nil, fmt.Errorf("export: task %d params: %w", id, err)
	}
	_ = json.Unmarshal([]byte(perms), &t.Permissions)
	return &t, nil
}

// Tasks lists tasks newest first (tenant and user optional), before id.
func (m *Module[TTx]) Tasks(ctx context.Context, tenant, user string, before int64, limit int) ([]*Task, error) {
	if before <= 0 {
		before = 1 << 62
	}
	rows, err := m.DB.Query(ctx, m.q.Get("TaskList"), tenant, user, before, limit)
	ids, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (int64, error) {
		var id int64
		return id, r.Scan(&id)
	})
	if err != nil {
		return nil, fmt.Errorf("export: listing tasks: %w", err)
	}
	out := make([]*Task, 0, len(ids))
	for _, id := range ids {
		t, err := m.Task(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Shards lists a task's shards.
func (m *Module[TTx]) Shards(ctx context.Context, task int64) ([]Shard, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("ShardsOf"), task)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Shard, error) {
		var s Shard
		err := r.Scan(&s.No, &s.Lo, &s.Hi, &s.State, &s.JobID, &s.Fence, &s.Owner, &s.Cursor, &s.Rows, &s.Bytes,
			&s.Chunks, &s.SHA256, &s.StaleRefused, &s.Settled, &s.Note, &s.UpdatedAt)
		return s, err
	})
}

// Cancel stops a running task: its shards see the state at their next
// chunk and stop; nothing is published. Audited.
func (m *Module[TTx]) Cancel(ctx context.Context, id int64, reason string) (*Task, error) {
	c, err := m.Client()
	if err != nil {
		return nil, err
	}
	err = m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		n, err := tx.Exec(ctx, m.q.Get("TaskCancel"), id, m.Now())
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := m.Task(ctx, id); err != nil {
				return err
			}
			return module.Errorf(http.StatusConflict, web.CodeInvalidState, "export %d is not running: only a running export can be cancelled", id)
		}
		return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "export.cancel", Target: fmt.Sprintf("export:%d", id), Reason: reason})
	})
	if err != nil {
		return nil, err
	}
	return m.Task(ctx, id)
}

// Retry reopens a failed or quarantined task: its unfinished shard jobs
// are retried from their committed cursors. Audited.
func (m *Module[TTx]) Retry(ctx context.Context, id int64, reason string) (*Task, error) {
	c, err := m.Client()
	if err != nil {
		return nil, err
	}
	t, err := m.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	err = m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		// A reopened task runs again: it takes a slot like a new one.
		if t.State == StateFailed || t.State == StateQuarantined {
			if err := m.holdSlot(ctx, tx, t.Tenant, t.User); err != nil {
				return err
			}
		}
		n, err := tx.Exec(ctx, m.q.Get("TaskReopen"), id, m.Now())
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := m.Task(ctx, id); err != nil {
				return err
			}
			return module.Errorf(http.StatusConflict, web.CodeInvalidState, "export %d has not failed: only a failed export can be retried", id)
		}
		return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "export.retry", Target: fmt.Sprintf("export:%d", id), Reason: reason})
	})
	if err != nil {
		return nil, err
	}
	shards, err := m.Shards(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, s := range shards {
		if s.State != "done" && s.JobID != 0 {
			if _, err := c.JobRetry(ctx, s.JobID, reason); err != nil && !errors.Is(err, keeltype.ErrInvalidState) {
				m.Log.Warn("retrying a shard job", "task", id, "shard", s.No, "error", err)
			}
		}
	}
	m.refreshKeys(ctx)
	return m.Task(ctx, id)
}
