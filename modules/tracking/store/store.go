// Package store holds every SQL statement of the tracking module behind
// one type; the statements live in queries/<dialect>/*.sql.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsql/sqlfile"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/modules/tracking/domain"
)

//go:embed queries/postgres/*.sql queries/sqlite/*.sql
var queryFiles embed.FS

// ErrNotFound is returned when a row asked for does not exist.
var ErrNotFound = errors.New("not found")

// Store runs the module's statements.
type Store[TTx any] struct {
	DB keelsql.DB[TTx]
	q  sqlfile.Set
}

// New loads the statements of db's dialect.
func New[TTx any](db keelsql.DB[TTx]) (*Store[TTx], error) {
	q, err := module.LoadQueries(queryFiles, "queries", db.Dialect())
	if err != nil {
		return nil, err
	}
	return &Store[TTx]{DB: db, q: q}, nil
}

func (s *Store[TTx]) sql(name string) string {
	q, ok := s.q[name]
	if !ok {
		panic("tracking store: no statement " + name)
	}
	return q
}

// CountSecurity adds one refused push of carrier ("" when unknown) for a
// reason: the only write a refused push makes.
func (s *Store[TTx]) CountSecurity(ctx context.Context, carrier, reason string, now time.Time) error {
	_, err := s.DB.Exec(ctx, s.sql("SecurityCount"), carrier, reason, now)
	if err != nil {
		return fmt.Errorf("counting a refused push: %w", err)
	}
	return nil
}

// SecurityRow is one counter of refused pushes.
type SecurityRow struct {
	Carrier string    `json:"carrier"`
	Reason  string    `json:"reason"`
	Count   int64     `json:"count"`
	LastAt  time.Time `json:"last_at"`
}

// SecurityCounts lists the counters.
func (s *Store[TTx]) SecurityCounts(ctx context.Context) ([]SecurityRow, error) {
	rows, err := s.DB.Query(ctx, s.sql("SecurityList"))
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (SecurityRow, error) {
		var x SecurityRow
		err := r.Scan(&x.Carrier, &x.Reason, &x.Count, &x.LastAt)
		return x, err
	})
}

// RawRow is a raw event's evidence as it is inserted.
type RawRow struct {
	Carrier, Waybill, Key, SourceID string
	Seq                             int64
	Code, OccurredRaw               string
	OccurredAt                      *time.Time
	TimeTrusted                     bool
	Location, Payload               string
	PayloadDigest, CoreDigest, Via  string
	ReceivedAt                      time.Time
}

// Result is what processing an event decided, as stored on its raw row.
type Result struct {
	RawID          int64          `json:"raw_id"`
	Outcome        domain.Outcome `json:"outcome"`
	Milestone      string         `json:"milestone,omitempty"`
	MappingVersion int            `json:"mapping_version,omitempty"`
	Revision       int64          `json:"revision,omitempty"`
}

// SetResult writes an event's result.
func (s *Store[TTx]) SetResult(ctx context.Context, tx keelsql.Tx[TTx], r Result, now time.Time) error {
	_, err := tx.Exec(ctx, s.sql("RawResult"), r.RawID, string(r.Outcome), r.Milestone, r.MappingVersion, r.Revision, now)
	if err != nil {
		return fmt.Errorf("recording the result of raw event %d: %w", r.RawID, err)
	}
	return nil
}

// TimelineEntry is a raw event with its result, for the timeline.
type TimelineEntry struct {
	ID             int64      `json:"id"`
	Key            string     `json:"idempotency_key"`
	SourceID       string     `json:"source_event_id,omitempty"`
	Seq            int64      `json:"seq,omitempty"`
	Code           string     `json:"code"`
	OccurredRaw    string     `json:"occurred_raw"`
	OccurredAt     *time.Time `json:"occurred_at,omitempty"`
	TimeTrusted    bool       `json:"time_trusted"`
	Location       string     `json:"location,omitempty"`
	Payload        string     `json:"payload"`
	Via            string     `json:"via"`
	ReceivedAt     time.Time  `json:"received_at"`
	Outcome        string     `json:"outcome"`
	Milestone      string     `json:"milestone,omitempty"`
	MappingVersion int        `json:"mapping_version,omitempty"`
	Revision       int64      `json:"revision,omitempty"`
}

// Timeline lists a waybill's raw events in source order.
func (s *Store[TTx]) Timeline(ctx context.Context, carrier, waybill string) ([]TimelineEntry, error) {
	rows, err := s.DB.Query(ctx, s.sql("RawTimeline"), carrier, waybill)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (TimelineEntry, error) {
		var e TimelineEntry
		err := r.Scan(&e.ID, &e.Key, &e.SourceID, &e.Seq, &e.Code, &e.OccurredRaw, &e.OccurredAt, &e.TimeTrusted, &e.Location,
			&e.Payload, &e.Via, &e.ReceivedAt, &e.Outcome, &e.Milestone, &e.MappingVersion, &e.Revision)
		return e, err
	})
}

// UnmappedRow is an event waiting for a mapping.
type UnmappedRow struct {
	ID          int64
	Waybill     string
	Key         string
	Seq         int64
	Code        string
	OccurredAt  *time.Time
	TimeTrusted bool
}

// Unmapped lists a carrier's events waiting for a mapping, after id.
func (s *Store[TTx]) Unmapped(ctx context.Context, carrier string, after int64, limit int) ([]UnmappedRow, error) {
	rows, err := s.DB.Query(ctx, s.sql("RawUnmapped"), carrier, after, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (UnmappedRow, error) {
		var u UnmappedRow
		err := r.Scan(&u.ID, &u.Waybill, &u.Key, &u.Seq, &u.Code, &u.OccurredAt, &u.TimeTrusted)
		return u, err
	})
}

// InsertCollision quarantines a second payload under a stored key.
func (s *Store[TTx]) InsertCollision(ctx context.Context, tx keelsql.Tx[TTx], r *RawRow, firstID int64) error {
	_, err := tx.Exec(ctx, s.sql("CollisionInsert"), r.Carrier, r.Key, firstID, r.Waybill, r.Payload, r.CoreDigest, r.Via, r.ReceivedAt)
	if err != nil {
		return fmt.Errorf("quarantining a collision on %s/%s: %w", r.Carrier, r.Key, err)
	}
	return nil
}

// Collision is a quarantined pair of payloads under one key.
type Collision struct {
	ID            int64     `json:"id"`
	Carrier       string    `json:"carrier"`
	Key           string    `json:"idempotency_key"`
	Waybill       string    `json:"waybill"`
	FirstPayload  string    `json:"first_payload"`
	SecondPayload string    `json:"second_payload"`
	ReceivedAt    time.Time `json:"received_at"`
	FirstAt       time.Time `json:"first_received_at"`
}

// Collisions lists quarantined collisions (newest first).
func (s *Store[TTx]) Collisions(ctx context.Context, carrier, waybill string, limit int) ([]Collision, error) {
	rows, err := s.DB.Query(ctx, s.sql("CollisionList"), carrier, waybill, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Collision, error) {
		var c Collision
		err := r.Scan(&c.ID, &c.Carrier, &c.Key, &c.Waybill, &c.FirstPayload, &c.SecondPayload, &c.ReceivedAt, &c.FirstAt)
		return c, err
	})
}

// Waybill is a waybill's aggregate row.
type Waybill struct {
	Carrier        string
	Waybill        string
	State          domain.State
	MappingVersion int
	Events         int64
	FirstSeenAt    time.Time
	UpdatedAt      *time.Time
	LastEventAt    time.Time
	VerifiedAt     *time.Time
}

func scanWaybill(r keelsql.Row) (Waybill, error) {
	var w Waybill
	var ms string
	var occ *time.Time
	err := r.Scan(&w.Carrier, &w.Waybill, &ms, &w.State.Seq, &occ, &w.State.TimeTrusted, &w.State.EventKey, &w.State.Revision,
		&w.MappingVersion, &w.Events, &w.FirstSeenAt, &w.UpdatedAt, &w.LastEventAt, &w.VerifiedAt)
	w.State.Milestone = domain.Milestone(ms)
	if occ != nil {
		w.State.OccurredAt = occ.UTC()
	}
	return w, err
}

// GetWaybill reads an aggregate (ErrNotFound when none).
func (s *Store[TTx]) GetWaybill(ctx context.Context, q keelsql.Querier, carrier, waybill string) (Waybill, error) {
	if q == nil {
		q = s.DB
	}
	w, err := scanWaybill(q.QueryRow(ctx, s.sql("WaybillGet"), carrier, waybill))
	if errors.Is(err, keelsql.ErrNoRows) {
		return w, ErrNotFound
	}
	if err != nil {
		return w, fmt.Errorf("reading waybill %s/%s: %w", carrier, waybill, err)
	}
	return w, nil
}

// Verified records the carrier's answer to a full query of a waybill, just
// read: what it reports as latest (the answer folded under the active
// mapping; zero when it reports nothing this mapping knows).
func (s *Store[TTx]) Verified(ctx context.Context, carrier, waybill string, now time.Time, answer domain.State) error {
	if _, err := s.DB.Exec(ctx, s.sql("WaybillVerified"), carrier, waybill, now, string(answer.Milestone), answer.Seq, answer.EventKey); err != nil {
		return fmt.Errorf("marking waybill %s/%s verified: %w", carrier, waybill, err)
	}
	return nil
}

// Search lists waybills whose number starts with prefix (all when empty).
func (s *Store[TTx]) Search(ctx context.Context, prefix, carrier string, limit int) ([]Waybill, error) {
	rows, err := s.DB.Query(ctx, s.sql("WaybillSearch"), prefix, carrier, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Waybill, error) { return scanWaybill(r) })
}

// GapIsOpen reports whether a gap is still open.
func (s *Store[TTx]) GapIsOpen(ctx context.Context, carrier, waybill string, seq int64) (bool, error) {
	var open bool
	if err := s.DB.QueryRow(ctx, s.sql("GapIsOpen"), carrier, waybill, seq).Scan(&open); err != nil {
		return false, fmt.Errorf("reading gap %s/%s#%d: %w", carrier, waybill, seq, err)
	}
	return open, nil
}

// Gap is one missing source sequence of a waybill.
type Gap struct {
	Seq         int64      `json:"seq"`
	OpenedAt    time.Time  `json:"opened_at"`
	ClosedAt    *time.Time `json:"closed_at,omitempty"`
	ClosedRawID int64      `json:"closed_raw_id,omitempty"`
}

// Gaps lists a waybill's gaps, open and closed.
func (s *Store[TTx]) Gaps(ctx context.Context, q keelsql.Querier, carrier, waybill string) ([]Gap, error) {
	if q == nil {
		q = s.DB
	}
	rows, err := q.Query(ctx, s.sql("GapsOf"), carrier, waybill)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Gap, error) {
		var g Gap
		err := r.Scan(&g.Seq, &g.OpenedAt, &g.ClosedAt, &g.ClosedRawID)
		return g, err
	})
}

// GapCount is a carrier's open gaps and the oldest one's age.
type GapCount struct {
	Carrier string
	Open    int64
	Oldest  *time.Time
}

// OpenGapCounts counts open gaps per carrier.
func (s *Store[TTx]) OpenGapCounts(ctx context.Context) (map[string]GapCount, error) {
	rows, err := s.DB.Query(ctx, s.sql("GapOpenCounts"))
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (GapCount, error) {
		var g GapCount
		err := r.Scan(&g.Carrier, &g.Open, &g.Oldest)
		return g, err
	})
	out := map[string]GapCount{}
	for _, g := range list {
		out[g.Carrier] = g
	}
	return out, err
}

// OpenGapRef names an open gap.
type OpenGapRef struct {
	Carrier, Waybill string
	Seq              int64
	OpenedAt         time.Time
}

// OpenGaps lists open gaps, oldest first.
func (s *Store[TTx]) OpenGaps(ctx context.Context, carrier string, limit int) ([]OpenGapRef, error) {
	rows, err := s.DB.Query(ctx, s.sql("GapOpenList"), carrier, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (OpenGapRef, error) {
		var g OpenGapRef
		err := r.Scan(&g.Carrier, &g.Waybill, &g.Seq, &g.OpenedAt)
		return g, err
	})
}
