package tracking

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

// ReconName is the waybill reconciler's name.
const ReconName = "tracking.waybills"

// reconciler proves per waybill that tracking converged: no gap open at the
// cutoff, the current state is the highest trusted version held as
// evidence, and no applied change ever went back.
type reconciler[TTx any] struct{ m *Module[TTx] }

func (r *reconciler[TTx]) Name() string            { return ReconName }
func (r *reconciler[TTx]) RuleVersion() string     { return "1" }
func (r *reconciler[TTx]) Schedule() keel.Schedule { return nil }

// Run compares every waybill first seen before the cutoff.
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
			for _, w := range page {
				out.Compared++
				ours, _ := json.Marshal(map[string]any{"milestone": w.Milestone, "seq": w.Seq, "revision": w.Revision,
					"open_gaps": w.OpenGaps, "highest_trusted_seq": w.MaxTrustedSeq, "applied_regressions": w.Regressions})
				key := c.Code + "/" + w.Waybill
				ev := map[string]json.RawMessage{"ours": ours}
				if w.OpenGaps > 0 {
					out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.MissingOurs, Key: key,
						Evidence: ev, SuggestedAction: "补拉缺口（在承运商补拉配额内）", SafeAutoHeal: true})
				}
				if c.Sequenced && w.MaxTrustedSeq > w.Seq {
					out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.StatusMismatch, Key: key,
						Evidence: ev, SuggestedAction: "当前状态不是最高可信版本：人工核对原始证据"})
				}
				if w.Regressions > 0 {
					out.Discrepancies = append(out.Discrepancies, keelrecon.Discrepancy{Class: keelrecon.Other, Key: key,
						Evidence: ev, SuggestedAction: "发现已应用的状态倒退：人工核对"})
				}
			}
			after = page[len(page)-1].Waybill
		}
	}
	return out, nil
}

// Execute heals a missing-ours discrepancy by queueing the waybill's open
// gaps again on the backfill share, keyed by the action id so the heal
// queues each once however often it is executed.
func (r *reconciler[TTx]) Execute(ctx context.Context, tx keelsql.Tx[TTx], d *keelrecon.DiscrepancyRow, actionID string) error {
	if d.Class != keelrecon.MissingOurs {
		return fmt.Errorf("reconciler %s executes only gap backfills, not %s", ReconName, d.Class)
	}
	code, waybill, ok := strings.Cut(d.Key, "/")
	c, err := r.m.carrier(code)
	if !ok || err != nil {
		return fmt.Errorf("discrepancy key %q names no carrier's waybill", d.Key)
	}
	gaps, err := r.m.store.Gaps(ctx, tx, code, waybill)
	if err != nil {
		return err
	}
	client := r.m.Engine().Load()
	if client == nil {
		return fmt.Errorf("the module is not started")
	}
	var jobs []keel.InsertParams
	for _, g := range gaps {
		if g.ClosedAt == nil {
			j := ingest.BackfillJob(c, waybill, g.Seq)
			j.Opts.IdempotencyKey += ":" + actionID
			jobs = append(jobs, j)
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

var _ = domain.Delivered
