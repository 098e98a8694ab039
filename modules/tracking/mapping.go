package tracking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/store"
)

var (
	errNotDraft = fmt.Errorf("%w: only a draft mapping version can be activated", keeltype.ErrInvalidState)
	// ErrReplayFirst: a mapping version is rolled out only after its replay
	// over stored history, whose diff the operator saw.
	ErrReplayFirst = fmt.Errorf("%w: replay this mapping version over history and review its diff before activating it", keeltype.ErrInvalidState)
)

func (m *Module[TTx]) carrier(code string) (*domain.Carrier, error) {
	for _, c := range m.carriers {
		if c.Code == code {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: no carrier %q", keeltype.ErrNotFound, code)
}

// CreateMapping stores a new draft mapping version of a carrier (audited).
func (m *Module[TTx]) CreateMapping(ctx context.Context, carrier string, codes map[string]domain.Milestone, note, actor string) (int, error) {
	if _, err := m.carrier(carrier); err != nil {
		return 0, err
	}
	mp := &domain.Mapping{Carrier: carrier, Codes: codes}
	if err := mp.Validate(); err != nil {
		return 0, fmt.Errorf("%w: %v", keeltype.ErrInvalidArgument, err)
	}
	var v int
	err := m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		var err error
		if v, err = m.store.CreateMapping(ctx, tx, mp, note, actor, m.Now()); err != nil {
			return err
		}
		return m.audit(ctx, tx, keel.Audit{Action: "tracking.mapping.create", Target: fmt.Sprintf("%s/v%d", carrier, v), Reason: note,
			Context: map[string]any{"codes": len(codes)}})
	})
	return v, err
}

// createInitialMapping stores version 1 from the configuration unless an
// instance starting beside this one stored it first.
func (m *Module[TTx]) createInitialMapping(ctx context.Context, carrier string, codes map[string]domain.Milestone) error {
	mp := &domain.Mapping{Carrier: carrier, Codes: codes}
	if err := mp.Validate(); err != nil {
		return fmt.Errorf("%w: %v", keeltype.ErrInvalidArgument, err)
	}
	const note = "initial mapping from configuration"
	return m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		created, err := m.store.CreateInitialMapping(ctx, tx, mp, note, "system:tracking", m.Now())
		if err != nil || !created {
			return err
		}
		return m.audit(ctx, tx, keel.Audit{Action: "tracking.mapping.create", Target: carrier + "/v1", Reason: note,
			Context: map[string]any{"codes": len(codes)}})
	})
}

func (m *Module[TTx]) audit(ctx context.Context, tx keelsql.Tx[TTx], a keel.Audit) error {
	c := m.Engine().Load()
	if c == nil {
		return nil // before Start: only the initial mapping, by the system
	}
	return c.AuditRecordTx(ctx, tx.Native(), a)
}

// DiffEntry is one waybill a mapping change would move.
type DiffEntry struct {
	Waybill string           `json:"waybill"`
	From    domain.Milestone `json:"from"`
	To      domain.Milestone `json:"to"`
	// Stays: rollout will not move this waybill (the events that would
	// are applied already under their own version, or the new result is
	// not above the current one); it is listed for an operator to judge,
	// since rollout never rewrites applied results or moves a waybill back.
	Stays bool `json:"stays,omitempty"`
}

// ReplayResult is a replay's diff.
type ReplayResult struct {
	store.Replay
	Entries []DiffEntry `json:"entries"`
}

// maxDiffEntries bounds the stored list (the counts stay exact).
const maxDiffEntries = 2000

// ReplayMapping replays a mapping version over the carrier's stored
// history and records which waybills would change milestone: nothing is
// applied. Activate needs it.
func (m *Module[TTx]) ReplayMapping(ctx context.Context, carrier string, version int, actor string) (*ReplayResult, error) {
	c, err := m.carrier(carrier)
	if err != nil {
		return nil, err
	}
	if _, err := m.store.MappingVersionGet(ctx, nil, carrier, version); errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s has no mapping version %d", keeltype.ErrNotFound, carrier, version)
	} else if err != nil {
		return nil, err
	}
	next, err := m.store.Mapping(ctx, nil, carrier, version)
	if err != nil {
		return nil, err
	}
	base, err := m.store.ActiveVersion(ctx, m.DB, carrier)
	if err != nil {
		return nil, err
	}
	res := &ReplayResult{Replay: store.Replay{Carrier: carrier, Version: version, BaseVersion: base, CreatedAt: m.Now(), CreatedBy: actor}}
	after := ""
	for {
		page, err := m.store.ReplayPage(ctx, carrier, after, 500)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		evs, err := m.store.ReplayEvents(ctx, carrier, after, page[len(page)-1].Waybill)
		if err != nil {
			return nil, err
		}
		byWaybill := map[string][]domain.ReplayEvent{}
		for _, e := range evs {
			byWaybill[e.Waybill] = append(byWaybill[e.Waybill], e)
		}
		for _, w := range page {
			res.Waybills++
			s := domain.Fold(byWaybill[w.Waybill], next, c.Sequenced)
			if s.Milestone == w.Milestone {
				continue
			}
			res.Changed++
			cur := domain.State{Milestone: w.Milestone, Seq: w.Seq, EventKey: w.EventKey, Revision: w.Revision}
			stays := !cur.Empty() && domain.Advance(cur, domain.Event{Key: s.EventKey, Seq: s.Seq, Milestone: s.Milestone,
				OccurredAt: s.OccurredAt, TimeTrusted: s.TimeTrusted}, c.Sequenced).Outcome != domain.Advanced
			if len(res.Entries) < maxDiffEntries {
				res.Entries = append(res.Entries, DiffEntry{Waybill: w.Waybill, From: w.Milestone, To: s.Milestone, Stays: stays})
			}
		}
		after = page[len(page)-1].Waybill
	}
	sort.Slice(res.Entries, func(i, j int) bool { return res.Entries[i].Waybill < res.Entries[j].Waybill })
	b, _ := json.Marshal(res.Entries)
	res.Diff = string(b)
	if res.ID, err = m.store.InsertReplay(ctx, &res.Replay); err != nil {
		return nil, err
	}
	return res, nil
}

// Replays lists a carrier's replays with their diffs.
func (m *Module[TTx]) Replays(ctx context.Context, carrier string, limit int) ([]ReplayResult, error) {
	rs, err := m.store.Replays(ctx, carrier, limit)
	if err != nil {
		return nil, err
	}
	out := make([]ReplayResult, 0, len(rs))
	for _, r := range rs {
		x := ReplayResult{Replay: r}
		_ = json.Unmarshal([]byte(r.Diff), &x.Entries)
		out = append(out, x)
	}
	return out, nil
}

// ActivateMapping rolls a replayed draft version out: it becomes active
// (audited with reason), and the events that waited for a mapping are
// applied under it. Events already applied keep the version they were
// mapped under; no waybill moves back.
func (m *Module[TTx]) ActivateMapping(ctx context.Context, carrier string, version int, actor, reason string) (int, error) {
	if _, err := m.carrier(carrier); err != nil {
		return 0, err
	}
	if err := m.activate(ctx, carrier, version, actor, reason, true); err != nil {
		return 0, err
	}
	return m.svc.ApplyUnmapped(ctx, carrier)
}

func (m *Module[TTx]) activate(ctx context.Context, carrier string, version int, actor, reason string, needReplay bool) error {
	return m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		v, err := m.store.MappingVersionGet(ctx, tx, carrier, version)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %s has no mapping version %d", keeltype.ErrNotFound, carrier, version)
		}
		if err != nil {
			return err
		}
		if v.State != "draft" {
			return errNotDraft
		}
		if needReplay {
			if _, err := m.store.LatestReplay(ctx, tx, carrier, version); errors.Is(err, store.ErrNotFound) {
				return ErrReplayFirst
			} else if err != nil {
				return err
			}
		}
		ok, err := m.store.Activate(ctx, tx, carrier, version, actor, m.Now())
		if err != nil {
			return err
		}
		if !ok {
			return errNotDraft
		}
		return m.audit(ctx, tx, keel.Audit{Action: "tracking.mapping.activate", Target: fmt.Sprintf("%s/v%d", carrier, version), Reason: reason})
	})
}
