package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/tracking/domain"
)

// MappingVersion is a stored mapping version.
type MappingVersion struct {
	Carrier     string     `json:"carrier"`
	Version     int        `json:"version"`
	State       string     `json:"state"`
	Note        string     `json:"note"`
	CreatedAt   time.Time  `json:"created_at"`
	CreatedBy   string     `json:"created_by"`
	ActivatedAt *time.Time `json:"activated_at,omitempty"`
	ActivatedBy string     `json:"activated_by,omitempty"`
}

func scanVersion(r keelsql.Row) (MappingVersion, error) {
	var v MappingVersion
	err := r.Scan(&v.Carrier, &v.Version, &v.State, &v.Note, &v.CreatedAt, &v.CreatedBy, &v.ActivatedAt, &v.ActivatedBy)
	return v, err
}

// CreateMapping stores a new draft version of a carrier's mapping.
func (s *Store[TTx]) CreateMapping(ctx context.Context, tx keelsql.Tx[TTx], m *domain.Mapping, note, actor string, now time.Time) (int, error) {
	var v int
	if err := tx.QueryRow(ctx, s.sql("MappingVersionInsert"), m.Carrier, note, now, actor).Scan(&v); err != nil {
		return 0, fmt.Errorf("creating a mapping version of %s: %w", m.Carrier, err)
	}
	for _, code := range m.SortedCodes() {
		if _, err := tx.Exec(ctx, s.sql("MappingCodeInsert"), m.Carrier, v, code, string(m.Codes[code])); err != nil {
			return 0, fmt.Errorf("storing code %s of mapping %s v%d: %w", code, m.Carrier, v, err)
		}
	}
	return v, nil
}

// CreateInitialMapping stores version 1 of a carrier's mapping unless it
// exists already (created is false then): instances that start together
// each try it, and one of them creates it.
func (s *Store[TTx]) CreateInitialMapping(ctx context.Context, tx keelsql.Tx[TTx], m *domain.Mapping, note, actor string, now time.Time) (created bool, err error) {
	var v int
	err = tx.QueryRow(ctx, s.sql("MappingVersionInsertInitial"), m.Carrier, note, now, actor).Scan(&v)
	if errors.Is(err, keelsql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("creating the first mapping version of %s: %w", m.Carrier, err)
	}
	for _, code := range m.SortedCodes() {
		if _, err := tx.Exec(ctx, s.sql("MappingCodeInsert"), m.Carrier, v, code, string(m.Codes[code])); err != nil {
			return false, fmt.Errorf("storing code %s of mapping %s v%d: %w", code, m.Carrier, v, err)
		}
	}
	return true, nil
}

// ActiveVersion is a carrier's active mapping version (0 when none).
func (s *Store[TTx]) ActiveVersion(ctx context.Context, q keelsql.Querier, carrier string) (int, error) {
	var v int
	err := q.QueryRow(ctx, s.sql("MappingActiveVersion"), carrier).Scan(&v)
	if errors.Is(err, keelsql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the active mapping of %s: %w", carrier, err)
	}
	return v, nil
}

// Mapping reads one version's codes.
func (s *Store[TTx]) Mapping(ctx context.Context, q keelsql.Querier, carrier string, version int) (*domain.Mapping, error) {
	if q == nil {
		q = s.DB
	}
	rows, err := q.Query(ctx, s.sql("MappingCodes"), carrier, version)
	type pair struct{ code, ms string }
	list, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (pair, error) {
		var p pair
		err := r.Scan(&p.code, &p.ms)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading mapping %s v%d: %w", carrier, version, err)
	}
	m := &domain.Mapping{Carrier: carrier, Version: version, Codes: map[string]domain.Milestone{}}
	for _, p := range list {
		m.Codes[p.code] = domain.Milestone(p.ms)
	}
	return m, nil
}

// ActiveMapping reads the active mapping (nil when none).
func (s *Store[TTx]) ActiveMapping(ctx context.Context, q keelsql.Querier, carrier string) (*domain.Mapping, error) {
	if q == nil {
		q = s.DB
	}
	v, err := s.ActiveVersion(ctx, q, carrier)
	if err != nil || v == 0 {
		return nil, err
	}
	return s.Mapping(ctx, q, carrier, v)
}

// MappingVersions lists a carrier's versions, newest first.
func (s *Store[TTx]) MappingVersions(ctx context.Context, carrier string) ([]MappingVersion, error) {
	rows, err := s.DB.Query(ctx, s.sql("MappingVersions"), carrier)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (MappingVersion, error) { return scanVersion(r) })
}

// MappingVersionGet reads one version (ErrNotFound when none).
func (s *Store[TTx]) MappingVersionGet(ctx context.Context, q keelsql.Querier, carrier string, version int) (MappingVersion, error) {
	if q == nil {
		q = s.DB
	}
	v, err := scanVersion(q.QueryRow(ctx, s.sql("MappingVersionGet"), carrier, version))
	if errors.Is(err, keelsql.ErrNoRows) {
		return v, ErrNotFound
	}
	return v, err
}

// Activate makes a draft version the active one (the previous active one
// retires), only if it is still a draft.
func (s *Store[TTx]) Activate(ctx context.Context, tx keelsql.Tx[TTx], carrier string, version int, actor string, now time.Time) (bool, error) {
	if _, err := tx.Exec(ctx, s.sql("MappingRetireActive"), carrier); err != nil {
		return false, fmt.Errorf("retiring the active mapping of %s: %w", carrier, err)
	}
	n, err := tx.Exec(ctx, s.sql("MappingActivate"), carrier, version, now, actor)
	if err != nil {
		return false, fmt.Errorf("activating mapping %s v%d: %w", carrier, version, err)
	}
	return n == 1, nil
}

// ReplayWaybill is a waybill's current aggregate as a replay compares it.
type ReplayWaybill struct {
	Waybill   string
	Milestone domain.Milestone
	Seq       int64
	EventKey  string
	Revision  int64
}

// ReplayPage lists a page of a carrier's waybills after a waybill.
func (s *Store[TTx]) ReplayPage(ctx context.Context, carrier, after string, limit int) ([]ReplayWaybill, error) {
	rows, err := s.DB.Query(ctx, s.sql("ReplayWaybillPage"), carrier, after, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ReplayWaybill, error) {
		var w ReplayWaybill
		var ms string
		err := r.Scan(&w.Waybill, &ms, &w.Seq, &w.EventKey, &w.Revision)
		w.Milestone = domain.Milestone(ms)
		return w, err
	})
}

// ReplayEvents reads the stored events of waybills in (from, to].
func (s *Store[TTx]) ReplayEvents(ctx context.Context, carrier, from, to string) ([]domain.ReplayEvent, error) {
	rows, err := s.DB.Query(ctx, s.sql("ReplayEvents"), carrier, from, to)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (domain.ReplayEvent, error) {
		var e domain.ReplayEvent
		var occ *time.Time
		err := r.Scan(&e.Waybill, &e.Key, &e.Seq, &e.Code, &occ, &e.TimeTrusted)
		if occ != nil {
			e.OccurredAt = occ.UTC()
		}
		return e, err
	})
}

// Replay is a recorded replay of a mapping version over history.
type Replay struct {
	ID          int64     `json:"id"`
	Carrier     string    `json:"carrier"`
	Version     int       `json:"version"`
	BaseVersion int       `json:"base_version"`
	CreatedAt   time.Time `json:"created_at"`
	CreatedBy   string    `json:"created_by"`
	Waybills    int64     `json:"waybills"`
	Changed     int64     `json:"changed"`
	Diff        string    `json:"-"`
}

func scanReplay(r keelsql.Row) (Replay, error) {
	var x Replay
	err := r.Scan(&x.ID, &x.Carrier, &x.Version, &x.BaseVersion, &x.CreatedAt, &x.CreatedBy, &x.Waybills, &x.Changed, &x.Diff)
	return x, err
}

// InsertReplay records a replay.
func (s *Store[TTx]) InsertReplay(ctx context.Context, r *Replay) (int64, error) {
	var id int64
	err := s.DB.QueryRow(ctx, s.sql("ReplayInsert"), r.Carrier, r.Version, r.BaseVersion, r.CreatedAt, r.CreatedBy, r.Waybills,
		r.Changed, r.Diff).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("recording a replay: %w", err)
	}
	return id, nil
}

// Replays lists a carrier's replays, newest first.
func (s *Store[TTx]) Replays(ctx context.Context, carrier string, limit int) ([]Replay, error) {
	rows, err := s.DB.Query(ctx, s.sql("ReplayList"), carrier, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (Replay, error) { return scanReplay(r) })
}

// LatestReplay is the last replay of a version (ErrNotFound when none).
func (s *Store[TTx]) LatestReplay(ctx context.Context, q keelsql.Querier, carrier string, version int) (Replay, error) {
	if q == nil {
		q = s.DB
	}
	r, err := scanReplay(q.QueryRow(ctx, s.sql("ReplayLatest"), carrier, version))
	if errors.Is(err, keelsql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// ReconRow is a waybill as reconciliation compares it.
type ReconRow struct {
	Carrier, Waybill string
	Milestone        string
	Seq, Revision    int64
	EventKey         string
	OpenGaps         int64
	MaxTrustedSeq    int64
	Regressions      int64
	// Advances is how many stored events record that they advanced the
	// aggregate: its revision must equal it.
	Advances    int64
	LastEventAt time.Time
	UpdatedAt   *time.Time
	// VerifiedAt is when the carrier last answered a full query, and
	// Carrier* what it reported as latest.
	VerifiedAt       *time.Time
	CarrierMilestone string
	CarrierSeq       int64
	CarrierEventKey  string
}

// ReconPage reads a page of a carrier's waybills with what reconciliation
// checks, as of cutoff.
func (s *Store[TTx]) ReconPage(ctx context.Context, carrier string, cutoff time.Time, after string, limit int) ([]ReconRow, error) {
	rows, err := s.DB.Query(ctx, s.sql("ReconWaybills"), carrier, cutoff, after, limit)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (ReconRow, error) {
		var x ReconRow
		err := r.Scan(&x.Carrier, &x.Waybill, &x.Milestone, &x.Seq, &x.Revision, &x.EventKey, &x.OpenGaps, &x.MaxTrustedSeq,
			&x.Regressions, &x.Advances, &x.LastEventAt, &x.UpdatedAt, &x.VerifiedAt, &x.CarrierMilestone, &x.CarrierSeq, &x.CarrierEventKey)
		return x, err
	})
}

// EvidenceEvent is a stored event with the milestone it was applied under.
type EvidenceEvent struct {
	Waybill string
	Event   domain.Event
}

// ReconEvidence reads the applied evidence of the waybills after from, up
// to and including through, received by cutoff, in arrival order.
func (s *Store[TTx]) ReconEvidence(ctx context.Context, carrier, from, through string, cutoff time.Time) ([]EvidenceEvent, error) {
	rows, err := s.DB.Query(ctx, s.sql("ReconEvidence"), carrier, from, through, cutoff)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (EvidenceEvent, error) {
		var x EvidenceEvent
		var ms string
		var occ *time.Time
		err := r.Scan(&x.Waybill, &x.Event.Key, &x.Event.Seq, &ms, &occ, &x.Event.TimeTrusted)
		x.Event.Milestone = domain.Milestone(ms)
		if occ != nil {
			x.Event.OccurredAt = occ.UTC()
		}
		return x, err
	})
}
