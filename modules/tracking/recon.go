package tracking

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
	"github.com/keelwork/keel/modules/tracking/store"
)

// ReconName is the waybill reconciler's name.
const ReconName = "tracking.waybills"

// reconciler proves per waybill that tracking converged: no gap open at the
// cutoff, the current state is the highest trusted version held as
// evidence and exactly what folding the applied evidence gives, no applied
// change ever went back, and the final milestone agrees with the carrier's
// own answer where the carrier can be asked.
type reconciler[TTx any] struct{ m *Module[TTx] }

func (r *reconciler[TTx]) Name() string            { return ReconName }
func (r *reconciler[TTx]) RuleVersion() string     { return "2" }
func (r *reconciler[TTx]) Schedule() keel.Schedule { return nil }

// finding is one reason a waybill disagrees, before findings of one class
// are merged into that class's discrepancy.
type finding struct {
	class  keelrecon.Class
	action string
	heal   bool
}

// Run compares every waybill first seen before the cutoff. Open gaps are
// judged on every waybill; the final state only on waybills settled at the
// cutoff (no event, change or carrier answer after it), so that a rerun at
// the same cutoff judges the same data.
func (r *reconciler[TTx]) Run(ctx context.Context, in keelrecon.RunInput) (keelrecon.RunOutput, error) {
	var out keelrecon.RunOutput
	for _, c := range r.m.carriers {
		after := ""
		for {
			page, err := r.m.store.ReconPage(ctx, c.Code, in.Cutoff, after, 500)
			if err != nil {
				return out, err
			}
			if len(page) == 0 {
				break
			}
			evidence, err := r.m.store.ReconEvidence(ctx, c.Code, after, page[len(page)-1].Waybill, in.Cutoff)
			if err != nil {
				return out, err
			}
			byWaybill := map[string][]domain.Event{}
			for _, e := range evidence {
				byWaybill[e.Waybill] = append(byWaybill[e.Waybill], e.Event)
			}
			for _, w := range page {
				out.Compared++
				out.Discrepancies = append(out.Discrepancies, judge(c, w, byWaybill[w.Waybill], in.Cutoff)...)
			}
			after = page[len(page)-1].Waybill
		}
	}
	return out, nil
}

// judge compares one waybill's aggregate with its evidence and the
// carrier's answer.
func judge(c *domain.Carrier, w store.ReconRow, evs []domain.Event, cutoff time.Time) []keelrecon.Discrepancy {
	var fs []finding
	if w.OpenGaps > 0 {
		fs = append(fs, finding{keelrecon.MissingOurs, "补拉缺口（在承运商补拉配额内）", true})
	}
	if c.Sequenced && w.MaxTrustedSeq > w.Seq {
		fs = append(fs, finding{keelrecon.StatusMismatch, "当前状态不是最高可信版本：人工核对原始证据", false})
	}
	if w.Regressions > 0 {
		fs = append(fs, finding{keelrecon.StatusMismatch, "发现已应用的状态倒退：人工核对", false})
	}
	settled := !w.LastEventAt.After(cutoff) && (w.UpdatedAt == nil || !w.UpdatedAt.After(cutoff)) &&
		(w.VerifiedAt == nil || !w.VerifiedAt.After(cutoff))
	ev := map[string]json.RawMessage{}
	ev["ours"], _ = json.Marshal(map[string]any{"milestone": w.Milestone, "seq": w.Seq, "event_key": w.EventKey, "revision": w.Revision,
		"open_gaps": w.OpenGaps, "highest_trusted_seq": w.MaxTrustedSeq, "applied_regressions": w.Regressions})
	if settled {
		// The raw evidence: folding every applied event (each under the
		// mapping it was applied with) must give the aggregate, and the
		// aggregate's revision must count the events that advanced it.
		var folded domain.State
		known := map[string]bool{}
		for _, e := range evs {
			folded = domain.Advance(folded, e, c.Sequenced).Next
			known[e.Key] = true
		}
		ev["evidence"], _ = json.Marshal(map[string]any{"milestone": folded.Milestone, "seq": folded.Seq, "event_key": folded.EventKey,
			"events": len(evs), "advances": w.Advances})
		if string(folded.Milestone) != w.Milestone || folded.Seq != w.Seq || folded.EventKey != w.EventKey || w.Advances != w.Revision {
			fs = append(fs, finding{keelrecon.StatusMismatch, "当前状态与原始证据推算的不一致：人工核对原始证据", false})
		}
		fs = append(fs, carrierFindings(c, w, known, ev)...)
	}
	return merge(w.Carrier+"/"+w.Waybill, fs, ev)
}

// carrierFindings compares the final state with the carrier's last full
// answer. An answer older than the aggregate's last change proves nothing
// about it: a final milestone (签收, 退回) not confirmed since is queued for
// a query on the backfill share, where the carrier can be asked.
func carrierFindings(c *domain.Carrier, w store.ReconRow, known map[string]bool, ev map[string]json.RawMessage) []finding {
	fresh := w.VerifiedAt != nil && (w.UpdatedAt == nil || !w.VerifiedAt.Before(*w.UpdatedAt))
	if !fresh {
		if domain.Milestone(w.Milestone).Terminal() && c.PullURL != "" {
			return []finding{{keelrecon.Other, "最终里程碑未经承运商核实：向承运商查询（补拉配额内）", true}}
		}
		return nil
	}
	ev["carrier"], _ = json.Marshal(map[string]any{"milestone": w.CarrierMilestone, "seq": w.CarrierSeq, "event_key": w.CarrierEventKey,
		"answered_at": w.VerifiedAt})
	switch {
	case w.CarrierEventKey == w.EventKey:
		return nil
	case w.CarrierEventKey != "" && !known[w.CarrierEventKey]:
		// The carrier's latest is not among what we applied: its code
		// waits for a mapping, it collided, or it was never delivered.
		return []finding{{keelrecon.StatusMismatch, "承运商报告的最新事件未被应用（待映射或碰撞）：核对映射与碰撞", false}}
	default:
		// We applied an event beyond what the carrier now reports.
		return []finding{{keelrecon.MissingTheirs, "承运商查询结果不含当前状态：向承运商核实原始推送", false}}
	}
}

// merge makes one discrepancy per class of a waybill's findings.
func merge(key string, fs []finding, ev map[string]json.RawMessage) []keelrecon.Discrepancy {
	var out []keelrecon.Discrepancy
	for _, class := range keelrecon.Classes {
		var actions []string
		heal := true
		for _, f := range fs {
			if f.class == class {
				actions = append(actions, f.action)
				heal = heal && f.heal
			}
		}
		if len(actions) > 0 {
			out = append(out, keelrecon.Discrepancy{Class: class, Key: key, Evidence: ev, SuggestedAction: strings.Join(actions, "；"), SafeAutoHeal: heal})
		}
	}
	return out
}

// Execute heals what can be healed by asking the carrier, keyed by the
// action id so that a heal queues its queries once however often it is
// executed: open gaps are queued again on the backfill share, and an
// unconfirmed final milestone gets a full query of the waybill there.
func (r *reconciler[TTx]) Execute(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	if d.Class != keelrecon.MissingOurs && d.Class != keelrecon.Other {
		return fmt.Errorf("reconciler %s executes only gap backfills and carrier queries, not %s", ReconName, d.Class)
	}
	code, waybill, ok := strings.Cut(d.Key, "/")
	c, err := r.m.carrier(code)
	if !ok || err != nil {
		return fmt.Errorf("discrepancy key %q names no carrier's waybill", d.Key)
	}
	client := r.m.Engine().Load()
	if client == nil {
		return fmt.Errorf("the module is not started")
	}
	var jobs []keel.InsertParams
	if d.Class == keelrecon.Other {
		jobs = append(jobs, ingest.VerifyJob(c, waybill, "tracking-verify:"+d.Key+":"+actionID))
	} else {
		gaps, err := r.m.store.Gaps(ctx, tx, code, waybill)
		if err != nil {
			return err
		}
		for _, g := range gaps {
			if g.ClosedAt == nil {
				j := ingest.BackfillJob(c, waybill, g.Seq)
				j.Opts.IdempotencyKey += ":" + actionID
				jobs = append(jobs, j)
			}
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	_, err = client.InsertManyTx(ctx, tx.Native(), jobs)
	return err
}

func (m *Module[TTx]) registerRecon() error {
	if m.Host().Recon == nil {
		return nil
	}
	return m.Host().Recon.Register(&reconciler[TTx]{m: m})
}
