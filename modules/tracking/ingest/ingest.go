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
	"slices"
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

// VerifyArgs is a full query of a waybill asked by reconciliation, to
// compare its final milestone with the carrier's own answer; it spends the
// backfill share, so verifying history never takes realtime's.
type VerifyArgs struct {
	Carrier string `json:"carrier"`
	Waybill string `json:"waybill"`
}

// Kind implements keel.JobArgs.
func (VerifyArgs) Kind() string { return "tracking.verify" }

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
//
// A push costs a fixed handful of statements, not several per event: the
// stored keys among the push's are read at once, the push's waybills are
// locked at once (in one order, so concurrent pushes wait rather than
// deadlock), every decision is made in memory on the locked aggregates,
// and then the evidence (with its results), gaps, aggregate moves and
// outbox rows are written set-based. The aggregate moves stay conditional
// on the revision each was read at; if another transaction stored one of
// the push's keys in between (its insert then skips the row), the whole
// push is decided again from what is stored.
func (s *Service[TTx]) Ingest(ctx context.Context, carrier, via string, evs []domain.RawEvent) ([]Result, error) {
	c, ok := s.Carriers[carrier]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownCarrier, carrier)
	}
	rows := make([]*store.RawRow, len(evs))
	for i, ev := range evs {
		r, err := rawRow(c, via, ev)
		if err != nil {
			return nil, err
		}
		rows[i] = r
	}
	var out []Result
	var err error
	for try := 0; try < maxPushTries; try++ {
		err = s.Store.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			var e error
			out, e = s.ingestTx(ctx, tx, c, via, rows)
			return e
		})
		if !errors.Is(err, errMoved) {
			break
		}
	}
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

// maxPushTries bounds how often a push is decided again when concurrent
// transactions keep storing its keys or moving its waybills first.
const maxPushTries = 8

// errMoved: what a push was decided on changed under it; decide again.
var errMoved = errors.New("stored events or aggregates changed under the push")

func rawRow(c *domain.Carrier, via string, ev domain.RawEvent) (*store.RawRow, error) {
	digest, err := domain.NormalizedDigest(ev.Payload, c.VolatileFields)
	if err != nil {
		return nil, err
	}
	row := &store.RawRow{Carrier: c.Code, Waybill: ev.Waybill, Key: domain.IdempotencyKey(c.Code, ev, digest), SourceID: ev.SourceID,
		Seq: ev.Seq, Code: ev.Code, OccurredRaw: ev.OccurredRaw, Location: ev.Location, Payload: string(ev.Payload),
		PayloadDigest: digest, CoreDigest: domain.CoreDigest(ev, digest), Via: via}
	occ, trusted, perr := domain.ParseOccurred(ev.OccurredRaw, c.Location(), c.ZoneTrusted)
	if perr == nil {
		row.OccurredAt, row.TimeTrusted = &occ, trusted
	}
	return row, nil
}

// item is one event being settled: new evidence of a push, or a stored
// event that waited for a mapping.
type item struct {
	row    *store.RawRow
	ms     domain.Milestone
	mapped bool
	res    Result
	// gapFrom..gapTo are the sequences its jump skipped.
	gapFrom, gapTo int64
}

func (s *Service[TTx]) ingestTx(ctx context.Context, tx keelsql.Tx[TTx], c *domain.Carrier, via string, rows []*store.RawRow) ([]Result, error) {
	m, err := s.Store.ActiveMapping(ctx, tx, c.Code)
	if err != nil {
		return nil, err
	}
	now := s.now()
	keys := make([]string, 0, len(rows))
	firstOf := map[string]int{} // key -> index of its first event in the push
	for i, r := range rows {
		if _, ok := firstOf[r.Key]; !ok {
			firstOf[r.Key] = i
			keys = append(keys, r.Key)
		}
	}
	stored, err := s.Store.RawExisting(ctx, tx, c.Code, keys)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(rows))
	items := make([]*item, len(rows)) // the new events, at their index
	var fresh []*item
	type collision struct {
		row   *store.RawRow
		first int // index of the first event of the key in the push, or -1
		id    int64
	}
	var collisions []collision
	for i, r := range rows {
		if st, ok := stored[r.Key]; ok {
			if st.Core == r.CoreDigest {
				out[i] = Result{Result: st.Result, Key: r.Key, Duplicate: true}
			} else {
				collisions = append(collisions, collision{row: r, first: -1, id: st.RawID})
				out[i] = Result{Result: store.Result{RawID: st.RawID, Outcome: domain.Collision}, Key: r.Key}
			}
			continue
		}
		if f := firstOf[r.Key]; f != i {
			if rows[f].CoreDigest != r.CoreDigest {
				collisions = append(collisions, collision{row: r, first: f})
			}
			continue // filled in once the first is settled
		}
		it := &item{row: r, res: Result{Key: r.Key, Result: store.Result{Outcome: domain.Unmapped}}}
		it.ms, it.mapped = m.Normalize(r.Code)
		items[i] = it
		fresh = append(fresh, it)
	}
	var mversion int
	if m != nil {
		mversion = m.Version
	}
	p, err := s.decide(ctx, tx, c, mversion, fresh, now, true)
	if err != nil {
		return nil, err
	}
	if len(fresh) > 0 {
		ins := make([]store.NewRaw, len(fresh))
		for i, it := range fresh {
			it.row.ReceivedAt = now
			ins[i] = store.NewRaw{Row: it.row, Result: it.res.Result}
		}
		ids, err := s.Store.InsertRaws(ctx, tx, c.Code, via, now, ins)
		if err != nil {
			return nil, err
		}
		if len(ids) != len(fresh) {
			return nil, errMoved // another push stored one of these keys first
		}
		for _, it := range fresh {
			it.res.RawID = ids[it.row.Key]
		}
	}
	for _, col := range collisions {
		id := col.id
		if col.first >= 0 {
			id = items[col.first].res.RawID
		}
		col.row.ReceivedAt = now
		if err := s.Store.InsertCollision(ctx, tx, col.row, id); err != nil {
			return nil, err
		}
	}
	if err := s.settle(ctx, tx, c, p, now); err != nil {
		return nil, err
	}
	for i, r := range rows {
		switch {
		case items[i] != nil:
			out[i] = items[i].res
		case out[i].Key == "": // a repeat of a key first seen in this push
			first := items[firstOf[r.Key]].res
			if rows[firstOf[r.Key]].CoreDigest == r.CoreDigest {
				out[i] = Result{Result: first.Result, Key: r.Key, Duplicate: true}
			} else {
				out[i] = Result{Result: store.Result{RawID: first.RawID, Outcome: domain.Collision}, Key: r.Key}
			}
		}
	}
	return out, nil
}

// plan is what deciding a set of events on their locked aggregates led to.
type plan struct {
	items   []*item
	applies []store.Apply
	// changed holds, per waybill whose aggregate advanced, its advances
	// in order.
	changed map[string][]*item
	order   []string // waybills in lock order
}

// decide locks the waybills of its and decides each event in order on
// them: results are filled (but for raw ids, known once stored).
func (s *Service[TTx]) decide(ctx context.Context, tx keelsql.Tx[TTx], c *domain.Carrier, mversion int, its []*item, now time.Time, countNew bool) (*plan, error) {
	p := &plan{items: its, changed: map[string][]*item{}}
	if len(its) == 0 {
		return p, nil
	}
	seen := map[string]bool{}
	for _, it := range its {
		if !seen[it.row.Waybill] {
			seen[it.row.Waybill] = true
			p.order = append(p.order, it.row.Waybill)
		}
	}
	slices.Sort(p.order)
	locked, err := s.Store.LockWaybills(ctx, tx, c.Code, p.order, now)
	if err != nil {
		return nil, err
	}
	states := make(map[string]*store.Apply, len(p.order))
	for _, wb := range p.order {
		w, ok := locked[wb]
		if !ok {
			return nil, fmt.Errorf("waybill %s/%s was not locked", c.Code, wb)
		}
		states[wb] = &store.Apply{Waybill: wb, From: w.State.Revision, Next: w.State, MappingVersion: w.MappingVersion}
	}
	for _, it := range its {
		a := states[it.row.Waybill]
		if countNew {
			a.Events++
		}
		if !it.mapped {
			it.res.Outcome = domain.Unmapped
			continue
		}
		ev := domain.Event{Key: it.row.Key, Seq: it.row.Seq, Milestone: it.ms, TimeTrusted: it.row.TimeTrusted}
		if it.row.OccurredAt != nil {
			ev.OccurredAt = *it.row.OccurredAt
		}
		d := domain.Advance(a.Next, ev, c.Sequenced)
		it.res.Outcome, it.res.Milestone, it.res.MappingVersion = d.Outcome, string(it.ms), mversion
		if d.Outcome == domain.Advanced {
			a.Next, a.MappingVersion = d.Next, mversion
			it.gapFrom, it.gapTo = d.GapFrom, d.GapTo
			p.changed[it.row.Waybill] = append(p.changed[it.row.Waybill], it)
		}
		it.res.Revision = a.Next.Revision
	}
	for _, wb := range p.order {
		if a := states[wb]; a.Events > 0 || a.Next.Revision != a.From {
			p.applies = append(p.applies, *a)
		}
	}
	return p, nil
}

// settle writes what decide planned once the events' raw ids are known:
// gaps opened and closed, the aggregates' conditional moves, the outbox
// rows and the backfills.
func (s *Service[TTx]) settle(ctx context.Context, tx keelsql.Tx[TTx], c *domain.Carrier, p *plan, now time.Time) error {
	var open, fill []store.GapRef
	filling := map[store.GapRef]*item{}
	for _, it := range p.items {
		for seq := it.gapFrom; it.gapFrom > 0 && seq <= it.gapTo; seq++ {
			open = append(open, store.GapRef{Waybill: it.row.Waybill, Seq: seq})
		}
		if it.mapped && it.res.Outcome != domain.Advanced && it.row.Seq > 0 {
			k := store.GapRef{Waybill: it.row.Waybill, Seq: it.row.Seq}
			if filling[k] == nil { // the first event of a sequence fills its gap
				filling[k] = it
				fill = append(fill, store.GapRef{Waybill: it.row.Waybill, Seq: it.row.Seq, RawID: it.res.RawID})
			}
		}
	}
	opened, err := s.Store.OpenGapBatch(ctx, tx, c.Code, now, open)
	if err != nil {
		return err
	}
	closed, err := s.Store.CloseGapBatch(ctx, tx, c.Code, now, fill)
	if err != nil {
		return err
	}
	var jobs []keel.InsertParams
	for _, it := range p.items {
		for seq := it.gapFrom; it.gapFrom > 0 && seq <= it.gapTo; seq++ {
			if opened(it.row.Waybill, seq) {
				it.res.GapsOpened = append(it.res.GapsOpened, seq)
				jobs = append(jobs, BackfillJob(c, it.row.Waybill, seq))
			}
		}
		if f := filling[store.GapRef{Waybill: it.row.Waybill, Seq: it.row.Seq}]; f == it {
			it.res.GapClosed = closed(it.row.Waybill, it.row.Seq)
		}
	}
	n, err := s.Store.ApplyWaybills(ctx, tx, c.Code, now, p.applies)
	if err != nil {
		return err
	}
	if n != len(p.applies) {
		return errMoved // only when a waybill moved outside the lock order
	}
	// One change per waybill and transaction: the revisions in between
	// were never committed on their own; the payload lists each step.
	// The push's events go out in one statement (the outbox's multi-row
	// insert), changes first, then details, in the order they were decided.
	var evs []keelevents.Event
	for _, a := range p.applies {
		steps := p.changed[a.Waybill]
		if len(steps) == 0 {
			continue
		}
		evs = append(evs, change(TopicChanged, c.Code, a.Waybill, "r"+strconv.FormatInt(a.Next.Revision, 10),
			changePayload(c.Code, a, steps)))
	}
	for _, it := range p.items {
		res := it.res
		if !res.GapClosed && res.Outcome != domain.Detail {
			continue
		}
		pl, _ := json.Marshal(map[string]any{"carrier": c.Code, "waybill": it.row.Waybill, "raw_id": res.RawID, "seq": it.row.Seq,
			"milestone": res.Milestone, "revision": res.Revision, "gap_closed": res.GapClosed})
		evs = append(evs, change(TopicDetail, c.Code, it.row.Waybill, "e"+strconv.FormatInt(res.RawID, 10), pl))
	}
	if err := s.emitAll(ctx, tx, evs); err != nil {
		return err
	}
	return s.queue(ctx, tx, jobs)
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

// VerifyJob is reconciliation's query of a waybill on the backfill share,
// idempotent under idem (the heal's action id).
func VerifyJob(c *domain.Carrier, waybill, idem string) keel.InsertParams {
	return keel.InsertParams{Args: VerifyArgs{Carrier: c.Code, Waybill: waybill},
		Opts: &keel.InsertOpts{Queue: Queue, FlowKey: c.BackfillKey(), MaxAttempts: 10, IdempotencyKey: idem}}
}

// Answer is what a carrier's full answer for a waybill reports as latest:
// its events folded under the active mapping (the zero State when none is
// mapped), with the same idempotency keys ingestion gives them.
func (s *Service[TTx]) Answer(ctx context.Context, carrier string, evs []domain.RawEvent) (domain.State, error) {
	c, ok := s.Carriers[carrier]
	if !ok {
		return domain.State{}, fmt.Errorf("%w %q", ErrUnknownCarrier, carrier)
	}
	m, err := s.Store.ActiveMapping(ctx, nil, carrier)
	if err != nil {
		return domain.State{}, err
	}
	var st domain.State
	for _, ev := range evs {
		r, err := rawRow(c, ViaPull, ev)
		if err != nil {
			return domain.State{}, err
		}
		ms, ok := m.Normalize(r.Code)
		if !ok {
			continue
		}
		e := domain.Event{Key: r.Key, Seq: r.Seq, Milestone: ms, TimeTrusted: r.TimeTrusted}
		if r.OccurredAt != nil {
			e.OccurredAt = *r.OccurredAt
		}
		st = domain.Advance(st, e, c.Sequenced).Next
	}
	return st, nil
}

func changePayload(carrier string, a store.Apply, steps []*item) json.RawMessage {
	next := a.Next
	p := map[string]any{"carrier": carrier, "waybill": a.Waybill, "revision": next.Revision, "from_revision": a.From,
		"milestone": next.Milestone, "seq": next.Seq, "event_key": next.EventKey, "mapping_version": a.MappingVersion}
	if !next.OccurredAt.IsZero() {
		p["occurred_at"] = next.OccurredAt
	}
	var gaps []int64
	list := make([]map[string]any, len(steps))
	for i, it := range steps {
		list[i] = map[string]any{"revision": it.res.Revision, "milestone": it.res.Milestone, "seq": it.row.Seq,
			"event_key": it.row.Key, "raw_id": it.res.RawID}
		gaps = append(gaps, it.res.GapsOpened...)
	}
	p["steps"] = list
	if len(gaps) > 0 {
		p["gaps_opened"] = gaps
	}
	b, _ := json.Marshal(p)
	return b
}

// change is the event of one waybill's change: keyed by the waybill, so
// its events keep their order for consumers; its id is stable (a retried
// push emits the same id, which the outbox turns into a no-op).
func change(topic, carrier, waybill, suffix string, payload json.RawMessage) keelevents.Event {
	key := carrier + ":" + waybill
	return keelevents.Event{Topic: topic, ID: key + ":" + suffix, Key: key, Payload: payload}
}

// emitAll writes a push's events in its transaction, in one statement per
// keelevents.MaxEmitMany events.
func (s *Service[TTx]) emitAll(ctx context.Context, tx keelsql.Tx[TTx], evs []keelevents.Event) error {
	if s.Events == nil {
		return nil
	}
	for len(evs) > 0 {
		n := min(len(evs), keelevents.MaxEmitMany)
		if err := s.Events.EmitManyTx(ctx, tx, evs[:n]); err != nil {
			return fmt.Errorf("emitting %d changes: %w", n, err)
		}
		evs = evs[n:]
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
		n := 0
		for try := 0; try < maxPushTries; try++ {
			err = s.Store.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
				n = 0
				m, err := s.Store.ActiveMapping(ctx, tx, carrier)
				if err != nil || m == nil {
					return err
				}
				now := s.now()
				var its []*item
				for _, u := range page {
					ms, ok := m.Normalize(u.Code)
					if !ok {
						continue
					}
					row := &store.RawRow{Carrier: carrier, Waybill: u.Waybill, Key: u.Key, Seq: u.Seq, OccurredAt: u.OccurredAt, TimeTrusted: u.TimeTrusted}
					its = append(its, &item{row: row, ms: ms, mapped: true, res: Result{Key: u.Key, Result: store.Result{RawID: u.ID}}})
				}
				p, err := s.decide(ctx, tx, c, m.Version, its, now, false)
				if err != nil {
					return err
				}
				for _, it := range its {
					// Only the result columns change: the evidence stays
					// as it was received.
					if err := s.Store.SetResult(ctx, tx, it.res.Result, now); err != nil {
						return err
					}
				}
				n = len(its)
				return s.settle(ctx, tx, c, p, now)
			})
			if !errors.Is(err, errMoved) {
				break
			}
		}
		if err != nil {
			return applied, err
		}
		applied += n
	}
}
