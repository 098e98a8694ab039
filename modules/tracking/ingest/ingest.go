// Package ingest turns carrier events into evidence and aggregates: each
// event is stored raw under its idempotency key (duplicates return the
// first result, collisions are quarantined), normalized under the active
// mapping version, and advances its waybill's aggregate by a conditional
// update; jumps open gaps and queue backfills on the carrier's backfill
// share; every change leaves through the outbox in the same transaction.
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/store"
)

// Topics of the events the module emits.
const (
	// TopicChanged: a waybill's aggregate advanced (the payload carries the
	// new revision, milestone and source sequence).
	TopicChanged = "tracking.waybill.changed"
	// TopicDetail: a late event filled detail (a gap closed) without moving
	// the current state.
	TopicDetail = "tracking.waybill.detail"
)

// Via names how an event arrived.
const (
	ViaWebhook = "webhook"
	ViaPull    = "pull"
)

// BackfillArgs is one gap's backfill: a query for the missing event on the
// carrier's backfill share.
type BackfillArgs struct {
	Carrier string `json:"carrier"`
	Waybill string `json:"waybill"`
	Seq     int64  `json:"seq"`
}

// Kind implements keel.JobArgs.
func (BackfillArgs) Kind() string { return "tracking.backfill" }

// RealtimeArgs is a realtime query of a waybill (a customer asked, or the
// carrier pushes nothing) on the carrier's realtime share.
type RealtimeArgs struct {
	Carrier string `json:"carrier"`
	Waybill string `json:"waybill"`
}

// Kind implements keel.JobArgs.
func (RealtimeArgs) Kind() string { return "tracking.realtime" }

// Queue is the engine queue of the module's carrier queries.
const Queue = "tracking"

// Result is what ingesting one event did.
type Result struct {
	store.Result
	Key       string `json:"idempotency_key"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// GapsOpened and GapClosed report gap bookkeeping.
	GapsOpened []int64 `json:"gaps_opened,omitempty"`
	GapClosed  bool    `json:"gap_closed,omitempty"`
}

// Service ingests events on one database.
type Service[TTx any] struct {
	Store    *store.Store[TTx]
	Carriers map[string]*domain.Carrier
	// Events is the outbox (nil: nothing is emitted, for hosts without
	// the events backbone).
	Events *keelevents.Events[TTx]
	// Client inserts backfill jobs (nil before the engine started: gaps
	// are recorded and the gap sweeper queues them later).
	Client func() *keel.Client[TTx]
	Now    func() time.Time
	M      *Metrics
}

// Metrics are the ingestion counters.
type Metrics struct {
	Events     *prometheus.CounterVec
	Security   *prometheus.CounterVec
	GapsOpened *prometheus.CounterVec
	GapsClosed *prometheus.CounterVec
}

// NewMetrics builds the counters (register them with the host).
func NewMetrics() *Metrics {
	return &Metrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_tracking_events_total",
			Help: "Carrier events ingested, by carrier and outcome (advanced, detail, duplicate, collision, unmapped, unordered)."},
			[]string{"carrier", "outcome"}),
		Security: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_tracking_refused_pushes_total",
			Help: "Webhook pushes refused (bad signature, stale timestamp, unknown carrier, malformed, oversized)."},
			[]string{"carrier", "reason"}),
		GapsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_tracking_gaps_opened_total",
			Help: "Source sequence gaps opened."}, []string{"carrier"}),
		GapsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keel_tracking_gaps_closed_total",
			Help: "Source sequence gaps closed by a late or backfilled event."}, []string{"carrier"}),
	}
}

// Collectors lists the metrics for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Events, m.Security, m.GapsOpened, m.GapsClosed}
}

func (s *Service[TTx]) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// ErrUnknownCarrier is returned for a carrier not configured.
var ErrUnknownCarrier = errors.New("unknown carrier")

// Ingest stores and applies a batch of one carrier's events in one
// transaction; results are in the batch's order.
func (s *Service[TTx]) Ingest(ctx context.Context, carrier, via string, evs []domain.RawEvent) ([]Result, error) {
	c, ok := s.Carriers[carrier]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownCarrier, carrier)
	}
	var out []Result
	var jobs []keel.InsertParams
	err := s.Store.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		out, jobs = out[:0], jobs[:0]
		m, err := s.Store.ActiveMapping(ctx, tx, carrier)
		if err != nil {
			return err
		}
		now := s.now()
		for _, ev := range evs {
			r, js, err := s.one(ctx, tx, c, m, via, ev, now)
			if err != nil {
				return err
			}
			out = append(out, r)
			jobs = append(jobs, js...)
		}
		return s.queue(ctx, tx, jobs)
	})
	if err != nil {
		return nil, err
	}
	for _, r := range out {
		s.M.Events.WithLabelValues(carrier, string(outcomeLabel(r))).Inc()
		if len(r.GapsOpened) > 0 {
			s.M.GapsOpened.WithLabelValues(carrier).Add(float64(len(r.GapsOpened)))
		}
		if r.GapClosed {
			s.M.GapsClosed.WithLabelValues(carrier).Inc()
		}
	}
	return out, nil
}

func outcomeLabel(r Result) domain.Outcome {
	if r.Duplicate {
		return domain.Duplicate
	}
	return r.Outcome
}

func (s *Service[TTx]) queue(ctx context.Context, tx keelsql.Tx[TTx], jobs []keel.InsertParams) error {
	if len(jobs) == 0 || s.Client == nil {
		return nil
	}
	client := s.Client()
	if client == nil {
		return nil
	}
	if _, err := client.InsertManyTx(ctx, tx.Native(), jobs); err != nil {
		return fmt.Errorf("queueing backfills: %w", err)
	}
	return nil
}

// BackfillJob is the insert of a gap's backfill: idempotent per gap, on the
// carrier's backfill flow key.
func BackfillJob(c *domain.Carrier, waybill string, seq int64) keel.InsertParams {
	return keel.InsertParams{Args: BackfillArgs{Carrier: c.Code, Waybill: waybill, Seq: seq},
		Opts: &keel.InsertOpts{Queue: Queue, FlowKey: c.BackfillKey(), MaxAttempts: 20,
			IdempotencyKey: "tracking-backfill:" + c.Code + ":" + waybill + ":" + strconv.FormatInt(seq, 10)}}
}

// RealtimeJob is a realtime query of a waybill on the realtime flow key.
func RealtimeJob(c *domain.Carrier, waybill, idem string) keel.InsertParams {
	return keel.InsertParams{Args: RealtimeArgs{Carrier: c.Code, Waybill: waybill},
		Opts: &keel.InsertOpts{Queue: Queue, FlowKey: c.RealtimeKey(), MaxAttempts: 10, Priority: 1, IdempotencyKey: idem}}
}

func (s *Service[TTx]) one(ctx context.Context, tx keelsql.Tx[TTx], c *domain.Carrier, m *domain.Mapping, via string, ev domain.RawEvent, now time.Time) (Result, []keel.InsertParams, error) {
	digest, err := domain.NormalizedDigest(ev.Payload, c.VolatileFields)
	if err != nil {
		return Result{}, nil, err
	}
	row := &store.RawRow{Carrier: c.Code, Waybill: ev.Waybill, Key: domain.IdempotencyKey(c.Code, ev, digest), SourceID: ev.SourceID,
		Seq: ev.Seq, Code: ev.Code, OccurredRaw: ev.OccurredRaw, Location: ev.Location, Payload: string(ev.Payload),
		PayloadDigest: digest, CoreDigest: domain.CoreDigest(ev, digest), Via: via, ReceivedAt: now}
	occ, trusted, perr := domain.ParseOccurred(ev.OccurredRaw, c.Location(), c.ZoneTrusted)
	if perr == nil {
		row.OccurredAt, row.TimeTrusted = &occ, trusted
	}
	id, err := s.Store.InsertRaw(ctx, tx, row)
	if err != nil {
		return Result{}, nil, err
	}
	if id == 0 {
		return s.seen(ctx, tx, row)
	}
	if err := s.Store.EnsureWaybill(ctx, tx, c.Code, ev.Waybill, now); err != nil {
		return Result{}, nil, err
	}
	res := Result{Result: store.Result{RawID: id, Outcome: domain.Unmapped}, Key: row.Key}
	ms, mapped := m.Normalize(ev.Code)
	if !mapped {
		return res, nil, s.Store.SetResult(ctx, tx, res.Result, now)
	}
	return s.apply(ctx, tx, c, m.Version, row, id, ms, now)
}

// seen answers a key already stored: the same core fields are a duplicate
// (the first result is returned), others a collision (quarantined).
func (s *Service[TTx]) seen(ctx context.Context, tx keelsql.Tx[TTx], row *store.RawRow) (Result, []keel.InsertParams, error) {
	first, core, err := s.Store.RawByKey(ctx, tx, row.Carrier, row.Key)
	if err != nil {
		return Result{}, nil, err
	}
	if core == row.CoreDigest {
		return Result{Result: first, Key: row.Key, Duplicate: true}, nil, nil
	}
	if err := s.Store.InsertCollision(ctx, tx, row, first.RawID); err != nil {
		return Result{}, nil, err
	}
	return Result{Result: store.Result{RawID: first.RawID, Outcome: domain.Collision}, Key: row.Key}, nil, nil
}

// maxAdvanceTries bounds re-decisions when concurrent transactions keep
// moving the same waybill first.
const maxAdvanceTries = 20

// apply decides and applies a mapped event to its waybill.
func (s *Service[TTx]) apply(ctx context.Context, tx keelsql.Tx[TTx], c *domain.Carrier, mversion int, row *store.RawRow, rawID int64, ms domain.Milestone, now time.Time) (Result, []keel.InsertParams, error) {
	ev := domain.Event{Key: row.Key, Seq: row.Seq, Milestone: ms, TimeTrusted: row.TimeTrusted}
	if row.OccurredAt != nil {
		ev.OccurredAt = *row.OccurredAt
	}
	for try := 0; try < maxAdvanceTries; try++ {
		w, err := s.Store.GetWaybill(ctx, tx, c.Code, row.Waybill)
		if err != nil {
			return Result{}, nil, err
		}
		d := domain.Advance(w.State, ev, c.Sequenced)
		res := Result{Result: store.Result{RawID: rawID, Outcome: d.Outcome, Milestone: string(ms), MappingVersion: mversion}, Key: row.Key}
		if d.Outcome != domain.Advanced {
			res.Revision = w.State.Revision
			return s.detail(ctx, tx, c, row, res, now)
		}
		ok, err := s.Store.Advance(ctx, tx, c.Code, row.Waybill, w.State.Revision, d.Next, mversion, now)
		if err != nil {
			return Result{}, nil, err
		}
		if !ok {
			continue // moved under us: decide again on what is there now
		}
		res.Revision = d.Next.Revision
		var jobs []keel.InsertParams
		for seq := d.GapFrom; d.GapFrom > 0 && seq <= d.GapTo; seq++ {
			opened, err := s.Store.OpenGap(ctx, tx, c.Code, row.Waybill, seq, now)
			if err != nil {
				return Result{}, nil, err
			}
			if opened {
				res.GapsOpened = append(res.GapsOpened, seq)
				jobs = append(jobs, BackfillJob(c, row.Waybill, seq))
			}
		}
		// No gap can be open at the new sequence: gaps lie below the
		// current one, and this event is above it.
		if err := s.emit(ctx, tx, TopicChanged, c.Code, row.Waybill, "r"+strconv.FormatInt(d.Next.Revision, 10), changePayload(c.Code, row, d.Next, mversion, res.GapsOpened)); err != nil {
			return Result{}, nil, err
		}
		return res, jobs, s.Store.SetResult(ctx, tx, res.Result, now)
	}
	return Result{}, nil, fmt.Errorf("waybill %s/%s kept moving under %d decisions; retry", c.Code, row.Waybill, maxAdvanceTries)
}

// detail keeps an event that did not move the aggregate: a late event
// closes its gap (and says so through the outbox), nothing else changes.
func (s *Service[TTx]) detail(ctx context.Context, tx keelsql.Tx[TTx], c *domain.Carrier, row *store.RawRow, res Result, now time.Time) (Result, []keel.InsertParams, error) {
	if row.Seq > 0 {
		closed, err := s.Store.CloseGap(ctx, tx, c.Code, row.Waybill, row.Seq, res.RawID, now)
		if err != nil {
			return Result{}, nil, err
		}
		res.GapClosed = closed
	}
	if res.GapClosed || res.Outcome == domain.Detail {
		p, _ := json.Marshal(map[string]any{"carrier": c.Code, "waybill": row.Waybill, "raw_id": res.RawID, "seq": row.Seq,
			"milestone": res.Milestone, "revision": res.Revision, "gap_closed": res.GapClosed})
		if err := s.emit(ctx, tx, TopicDetail, c.Code, row.Waybill, "e"+strconv.FormatInt(res.RawID, 10), p); err != nil {
			return Result{}, nil, err
		}
	}
	return res, nil, s.Store.SetResult(ctx, tx, res.Result, now)
}

func changePayload(carrier string, row *store.RawRow, next domain.State, mversion int, gaps []int64) json.RawMessage {
	p := map[string]any{"carrier": carrier, "waybill": row.Waybill, "revision": next.Revision, "milestone": next.Milestone,
		"seq": next.Seq, "event_key": next.EventKey, "mapping_version": mversion}
	if !next.OccurredAt.IsZero() {
		p["occurred_at"] = next.OccurredAt
	}
	if len(gaps) > 0 {
		p["gaps_opened"] = gaps
	}
	b, _ := json.Marshal(p)
	return b
}

func (s *Service[TTx]) emit(ctx context.Context, tx keelsql.Tx[TTx], topic, carrier, waybill, suffix string, payload json.RawMessage) error {
	if s.Events == nil {
		return nil
	}
	key := carrier + ":" + waybill
	err := s.Events.EmitTx(ctx, tx, keelevents.Event{Topic: topic, ID: key + ":" + suffix, Key: key, Payload: payload})
	if err != nil {
		return fmt.Errorf("emitting %s for %s: %w", topic, key, err)
	}
	return nil
}

// ApplyUnmapped applies, under the carrier's now active mapping, the events
// that waited for one; those whose code is still unmapped keep waiting. It
// returns how many were applied.
func (s *Service[TTx]) ApplyUnmapped(ctx context.Context, carrier string) (int, error) {
	c, ok := s.Carriers[carrier]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownCarrier, carrier)
	}
	applied := 0
	var after int64
	for {
		page, err := s.Store.Unmapped(ctx, carrier, after, 200)
		if err != nil || len(page) == 0 {
			return applied, err
		}
		after = page[len(page)-1].ID
		var jobs []keel.InsertParams
		err = s.Store.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			jobs = jobs[:0]
			m, err := s.Store.ActiveMapping(ctx, tx, carrier)
			if err != nil {
				return err
			}
			now := s.now()
			for _, u := range page {
				ms, ok := m.Normalize(u.Code)
				if !ok {
					continue
				}
				row := &store.RawRow{Carrier: carrier, Waybill: u.Waybill, Key: u.Key, Seq: u.Seq, OccurredAt: u.OccurredAt, TimeTrusted: u.TimeTrusted}
				_, js, err := s.apply(ctx, tx, c, m.Version, row, u.ID, ms, now)
				if err != nil {
					return err
				}
				jobs = append(jobs, js...)
				applied++
			}
			return s.queue(ctx, tx, jobs)
		})
		if err != nil {
			return applied, err
		}
	}
}
