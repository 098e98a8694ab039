package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// The set-based statements of ingestion: each takes a whole push, so a push
// of hundreds of events costs a handful of round trips instead of several
// per event (which bounded ingestion at the database's round-trip rate).
// Record sets travel as one JSON array argument: PostgreSQL reads it with
// json_to_recordset, SQLite with json_each; a time goes both ways, as
// RFC 3339 text for PostgreSQL and unix microseconds for SQLite (how
// keelsql stores SQLite times), so each dialect's statement reads its own.

// Existing is a stored event found under one of a push's keys.
type Existing struct {
	Result
	Core string
}

// RawExisting reads the stored events among keys.
func (s *Store[TTx]) RawExisting(ctx context.Context, tx keelsql.Tx[TTx], carrier string, keys []string) (map[string]Existing, error) {
	rows, err := tx.Query(ctx, s.sql("RawExisting"), carrier, keelsql.ArrayOf(keys))
	out := map[string]Existing{}
	type kv struct {
		key string
		e   Existing
	}
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (kv, error) {
		var x kv
		var outcome string
		err := r.Scan(&x.key, &x.e.RawID, &x.e.Core, &outcome, &x.e.Milestone, &x.e.MappingVersion, &x.e.Revision)
		x.e.Outcome = domain.Outcome(outcome)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading stored events of %s: %w", carrier, err)
	}
	for _, x := range list {
		out[x.key] = x.e
	}
	return out, nil
}

// LockWaybills creates the waybills not seen before and returns every
// named aggregate, locked until the transaction ends. waybills must be
// sorted and distinct: every transaction locks in that one order.
func (s *Store[TTx]) LockWaybills(ctx context.Context, tx keelsql.Tx[TTx], carrier string, waybills []string, now time.Time) (map[string]Waybill, error) {
	rows, err := tx.Query(ctx, s.sql("WaybillLock"), carrier, now, keelsql.ArrayOf(waybills))
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Waybill, error) { return scanWaybill(r) })
	if err != nil {
		return nil, fmt.Errorf("locking %d waybills of %s: %w", len(waybills), carrier, err)
	}
	out := make(map[string]Waybill, len(list))
	for _, w := range list {
		out[w.Waybill] = w
	}
	return out, nil
}

// NewRaw is a raw event to insert with its decided result.
type NewRaw struct {
	Row    *RawRow
	Result Result
}

type rawRec struct {
	Waybill        string  `json:"waybill"`
	Key            string  `json:"key"`
	SourceID       string  `json:"source_id"`
	Seq            int64   `json:"seq"`
	Code           string  `json:"code"`
	OccurredRaw    string  `json:"occurred_raw"`
	OccurredAt     *string `json:"occurred_at"`
	OccurredUS     *int64  `json:"occurred_us"`
	TimeTrusted    bool    `json:"time_trusted"`
	Location       string  `json:"location"`
	Payload        string  `json:"payload"`
	PayloadDigest  string  `json:"payload_digest"`
	CoreDigest     string  `json:"core_digest"`
	Outcome        string  `json:"outcome"`
	Milestone      string  `json:"milestone"`
	MappingVersion int     `json:"mapping_version"`
	Revision       int64   `json:"revision"`
}

func timeArgs(t *time.Time) (*string, *int64) {
	if t == nil {
		return nil, nil
	}
	s, us := t.UTC().Format(time.RFC3339Nano), t.UnixMicro()
	return &s, &us
}

// InsertRaws stores a push's new evidence, each row with its result, and
// returns the new ids by key. A key another transaction stored meanwhile
// is missing from the answer: the caller must decide again.
func (s *Store[TTx]) InsertRaws(ctx context.Context, tx keelsql.Tx[TTx], carrier, via string, now time.Time, rs []NewRaw) (map[string]int64, error) {
	recs := make([]rawRec, len(rs))
	for i, n := range rs {
		r := n.Row
		at, us := timeArgs(r.OccurredAt)
		recs[i] = rawRec{Waybill: r.Waybill, Key: r.Key, SourceID: r.SourceID, Seq: r.Seq, Code: r.Code, OccurredRaw: r.OccurredRaw,
			OccurredAt: at, OccurredUS: us, TimeTrusted: r.TimeTrusted, Location: r.Location, Payload: r.Payload,
			PayloadDigest: r.PayloadDigest, CoreDigest: r.CoreDigest, Outcome: string(n.Result.Outcome), Milestone: n.Result.Milestone,
			MappingVersion: n.Result.MappingVersion, Revision: n.Result.Revision}
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return nil, fmt.Errorf("encoding raw events: %w", err)
	}
	rows, err := tx.Query(ctx, s.sql("RawInsertBatch"), carrier, via, now, string(b))
	type idKey struct {
		id  int64
		key string
	}
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (idKey, error) {
		var x idKey
		err := r.Scan(&x.id, &x.key)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("storing %d raw events of %s: %w", len(rs), carrier, err)
	}
	out := make(map[string]int64, len(list))
	for _, x := range list {
		out[x.key] = x.id
	}
	return out, nil
}

// Apply is one aggregate's move in a push: from the revision it was locked
// at to its new state (the same state when only events were counted).
type Apply struct {
	Waybill        string
	From           int64
	Next           domain.State
	MappingVersion int
	// Events is how many new raw events the push brought the waybill.
	Events int64
}

type applyRec struct {
	Waybill        string  `json:"waybill"`
	From           int64   `json:"from_revision"`
	Milestone      string  `json:"milestone"`
	Seq            int64   `json:"seq"`
	OccurredAt     *string `json:"occurred_at"`
	OccurredUS     *int64  `json:"occurred_us"`
	TimeTrusted    bool    `json:"time_trusted"`
	EventKey       string  `json:"event_key"`
	Revision       int64   `json:"revision"`
	MappingVersion int     `json:"mapping_version"`
	Events         int64   `json:"events"`
}

// ApplyWaybills moves the aggregates, each only if still at its From
// revision (a conditional update); it returns how many moved.
func (s *Store[TTx]) ApplyWaybills(ctx context.Context, tx keelsql.Tx[TTx], carrier string, now time.Time, as []Apply) (int, error) {
	if len(as) == 0 {
		return 0, nil
	}
	recs := make([]applyRec, len(as))
	for i, a := range as {
		var occ *time.Time
		if !a.Next.OccurredAt.IsZero() {
			t := a.Next.OccurredAt
			occ = &t
		}
		at, us := timeArgs(occ)
		recs[i] = applyRec{Waybill: a.Waybill, From: a.From, Milestone: string(a.Next.Milestone), Seq: a.Next.Seq, OccurredAt: at,
			OccurredUS: us, TimeTrusted: a.Next.TimeTrusted, EventKey: a.Next.EventKey, Revision: a.Next.Revision,
			MappingVersion: a.MappingVersion, Events: a.Events}
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return 0, fmt.Errorf("encoding aggregate moves: %w", err)
	}
	rows, err := tx.Query(ctx, s.sql("WaybillApply"), carrier, now, string(b))
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var w string
		return w, r.Scan(&w)
	})
	if err != nil {
		return 0, fmt.Errorf("advancing %d waybills of %s: %w", len(as), carrier, err)
	}
	return len(list), nil
}

// GapRef is one sequence of one waybill (and, closing a gap, the raw event
// that filled it).
type GapRef struct {
	Waybill string `json:"waybill"`
	Seq     int64  `json:"seq"`
	RawID   int64  `json:"raw_id,omitempty"`
}

type wbSeq struct {
	Waybill string
	Seq     int64
}

func (s *Store[TTx]) gapBatch(ctx context.Context, tx keelsql.Tx[TTx], name, carrier string, now time.Time, gs []GapRef) (map[wbSeq]bool, error) {
	if len(gs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(gs)
	if err != nil {
		return nil, fmt.Errorf("encoding gaps: %w", err)
	}
	rows, err := tx.Query(ctx, s.sql(name), carrier, now, string(b))
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (wbSeq, error) {
		var x wbSeq
		return x, r.Scan(&x.Waybill, &x.Seq)
	})
	if err != nil {
		return nil, fmt.Errorf("recording %d gaps of %s: %w", len(gs), carrier, err)
	}
	out := make(map[wbSeq]bool, len(list))
	for _, x := range list {
		out[x] = true
	}
	return out, nil
}

// OpenGapBatch records the skipped sequences without stored evidence as
// gaps; it reports which were opened.
func (s *Store[TTx]) OpenGapBatch(ctx context.Context, tx keelsql.Tx[TTx], carrier string, now time.Time, gs []GapRef) (func(waybill string, seq int64) bool, error) {
	m, err := s.gapBatch(ctx, tx, "GapOpenBatch", carrier, now, gs)
	return func(w string, seq int64) bool { return m[wbSeq{w, seq}] }, err
}

// CloseGapBatch closes open gaps with the raw events that filled them; it
// reports which were closed.
func (s *Store[TTx]) CloseGapBatch(ctx context.Context, tx keelsql.Tx[TTx], carrier string, now time.Time, gs []GapRef) (func(waybill string, seq int64) bool, error) {
	m, err := s.gapBatch(ctx, tx, "GapCloseBatch", carrier, now, gs)
	return func(w string, seq int64) bool { return m[wbSeq{w, seq}] }, err
}
