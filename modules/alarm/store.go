package alarm

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelwork/keel/keelsql"
)

var errNoRows = sql.ErrNoRows

func isNoRows(err error) bool {
	return errors.Is(err, keelsql.ErrNoRows) || errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows)
}

// retryable: the database refused a transaction for a conflict between
// writers (a deadlock, a serialization failure, a busy SQLite file); the
// same work may run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001" || pe.Code == "23505"
	}
	if errors.Is(err, errConflict) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "SQLITE_BUSY") || strings.Contains(s, "database is locked")
}

func toValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Instance is one alarm instance: one fault from its trigger to its
// recovery.
type Instance struct {
	ID           string     `json:"id"`
	Device       string     `json:"device"`
	Rule         string     `json:"rule"`
	RuleVersion  int        `json:"rule_version"`
	State        string     `json:"state"`
	Severity     int        `json:"severity"`
	PeakSeverity int        `json:"peak_severity"`
	PeakValue    float64    `json:"peak_value"`
	FirstValue   float64    `json:"first_value"`
	LastValue    float64    `json:"last_value"`
	Count        int64      `json:"count"`
	FirstAt      time.Time  `json:"first_at"`
	LastAt       time.Time  `json:"last_at"`
	Boot         int64      `json:"boot"`
	FirstSeq     int64      `json:"first_seq"`
	LastSeq      int64      `json:"last_seq"`
	ReceivedAt   time.Time  `json:"received_at"`
	RecoveredAt  *time.Time `json:"recovered_at,omitempty"`
	AckedAt      *time.Time `json:"acked_at,omitempty"`
	AckedBy      string     `json:"acked_by,omitempty"`
	AckComment   string     `json:"ack_comment,omitempty"`
	Ver          int64      `json:"version"`
	FlushedVer   int64      `json:"-"`
}

func scanInstance(r interface{ Scan(...any) error }) (*Instance, error) {
	var i Instance
	err := r.Scan(&i.ID, &i.Device, &i.Rule, &i.RuleVersion, &i.State, &i.Severity, &i.PeakSeverity, &i.PeakValue, &i.FirstValue,
		&i.LastValue, &i.Count, &i.FirstAt, &i.LastAt, &i.Boot, &i.FirstSeq, &i.LastSeq, &i.ReceivedAt, &i.RecoveredAt, &i.AckedAt,
		&i.AckedBy, &i.AckComment, &i.Ver, &i.FlushedVer)
	return &i, err
}

func (m *Module[TTx]) instanceTx(ctx context.Context, q keelsql.Querier, id string) (*Instance, error) {
	return scanInstance(q.QueryRow(ctx, m.q.Get("InstanceGet"), id))
}

func (m *Module[TTx]) instancesTx(ctx context.Context, q keelsql.Querier, query string, args ...any) ([]*Instance, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Instance
	for rows.Next() {
		i, err := scanInstance(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// InstanceByID reads one instance (keeltype.ErrNotFound-free: nil, nil
// when there is none).
func (m *Module[TTx]) InstanceByID(ctx context.Context, id string) (*Instance, error) {
	i, err := m.instanceTx(ctx, m.DB, id)
	if isNoRows(err) {
		return nil, nil
	}
	return i, err
}

// Instances lists instances: open ones first, by peak severity.
func (m *Module[TTx]) Instances(ctx context.Context, state, device, rule string, limit int) ([]*Instance, error) {
	return m.instancesTx(ctx, m.DB, m.q.Get("InstanceList"), state, device, rule, limit)
}

// HistoryEntry is one state change of an instance.
type HistoryEntry struct {
	At          time.Time `json:"at"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	Reason      string    `json:"reason"`
	Seq         int64     `json:"seq"`
	Value       float64   `json:"value"`
	RuleVersion int       `json:"rule_version"`
	Actor       string    `json:"actor,omitempty"`
}

// History lists an instance's state changes in order.
func (m *Module[TTx]) History(ctx context.Context, id string) ([]HistoryEntry, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("HistoryOf"), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []HistoryEntry
	for rows.Next() {
		var h HistoryEntry
		if err := rows.Scan(&h.At, &h.From, &h.To, &h.Reason, &h.Seq, &h.Value, &h.RuleVersion, &h.Actor); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// Notice is one notification record.
type Notice struct {
	ID         int64      `json:"id"`
	Key        string     `json:"key"`
	InstanceID string     `json:"instance_id,omitempty"`
	Group      string     `json:"group,omitempty"`
	Kind       string     `json:"kind"`
	Level      int        `json:"level"`
	Lane       string     `json:"lane"`
	Channel    string     `json:"channel"`
	State      string     `json:"state"`
	Reason     string     `json:"reason,omitempty"`
	Attempts   int        `json:"attempts"`
	Members    int        `json:"members"`
	Body       string     `json:"body"`
	CreatedAt  time.Time  `json:"created_at"`
	EventAt    time.Time  `json:"event_at"`
	SentAt     *time.Time `json:"sent_at,omitempty"`
	ReplayID   int64      `json:"replay_id,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
}

func scanNotice(r interface{ Scan(...any) error }) (*Notice, error) {
	var n Notice
	err := r.Scan(&n.ID, &n.Key, &n.InstanceID, &n.Group, &n.Kind, &n.Level, &n.Lane, &n.Channel, &n.State, &n.Reason, &n.Attempts,
		&n.Members, &n.Body, &n.CreatedAt, &n.EventAt, &n.SentAt, &n.ReplayID, &n.LastError)
	return &n, err
}

// Notice reads one notice.
func (m *Module[TTx]) Notice(ctx context.Context, id int64) (*Notice, error) {
	return scanNotice(m.DB.QueryRow(ctx, m.q.Get("NoticeGet"), id))
}

// Notices lists notices, newest first.
func (m *Module[TTx]) Notices(ctx context.Context, state, instance string, limit int) ([]*Notice, error) {
	return m.noticesQ(ctx, m.DB, m.q.Get("NoticeList"), state, instance, limit)
}

func (m *Module[TTx]) noticesQ(ctx context.Context, q keelsql.Querier, query string, args ...any) ([]*Notice, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Notice
	for rows.Next() {
		n, err := scanNotice(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// deviceCache knows registered devices; a miss asks the database (a
// device registered by another instance is found), an unknown one is
// asked again after a few seconds.
type deviceCache struct {
	mu      sync.RWMutex
	known   map[string]bool
	unknown map[string]time.Time
	lookup  func(ctx context.Context, id string) (bool, error)
}

func (d *deviceCache) knownID(ctx context.Context, id string) (bool, error) {
	d.mu.RLock()
	ok := d.known[id]
	until, neg := d.unknown[id]
	d.mu.RUnlock()
	if ok {
		return true, nil
	}
	if neg && time.Now().Before(until) {
		return false, nil
	}
	found, err := d.lookup(ctx, id)
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	if found {
		d.known[id] = true
		delete(d.unknown, id)
	} else if len(d.unknown) < 100000 {
		d.unknown[id] = time.Now().Add(5 * time.Second)
	}
	d.mu.Unlock()
	return found, nil
}

func (d *deviceCache) add(id string) {
	d.mu.Lock()
	d.known[id] = true
	delete(d.unknown, id)
	d.mu.Unlock()
}

// ruleCache holds the active rule versions by metric.
type ruleCache struct {
	mu       sync.RWMutex
	byMetric map[string][]*Rule
	all      []*Rule
}

func (c *ruleCache) forMetric(metric string) []*Rule {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byMetric[metric]
}

func (c *ruleCache) set(rs []*Rule) {
	by := map[string][]*Rule{}
	for _, r := range rs {
		by[r.Metric] = append(by[r.Metric], r)
	}
	c.mu.Lock()
	c.byMetric, c.all = by, rs
	c.mu.Unlock()
}

func (c *ruleCache) list() []*Rule {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.all
}

func (r *routeSet) hasDevice(device string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for k := range r.m {
		if k[0] == device {
			return true
		}
	}
	return false
}
