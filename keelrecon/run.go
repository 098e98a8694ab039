package keelrecon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// MaxEvidence bounds one discrepancy's evidence (all sources), in bytes.
const MaxEvidence = 64 << 10

// Run runs a reconciler now over everything up to cutoff (zero: now), as
// keel.ActorFrom(ctx), audited. The run's figures are returned whether it
// succeeded or failed (Run.State, Run.Error).
func (r *Recon[TTx]) Run(ctx context.Context, name string, cutoff time.Time) (*Run, error) {
	if _, err := r.Reconciler(name); err != nil {
		return nil, err
	}
	now := r.now()
	if cutoff.IsZero() {
		cutoff = now
	}
	// Compared as stored, in microseconds: the clock is truncated (now), so
	// a caller's time.Now() read an instant before, in the same
	// microsecond, would otherwise come out ahead of it and be refused.
	if cutoff = cutoff.UTC().Truncate(time.Microsecond); cutoff.After(now) {
		return nil, fmt.Errorf("%w: cutoff %s is in the future: a run compares what exists", keeltype.ErrInvalidArgument,
			cutoff.Format(time.RFC3339Nano))
	}
	if _, err := r.engine(ctx); err != nil {
		return nil, err
	}
	return r.run(ctx, name, cutoff, "manual")
}

func (r *Recon[TTx]) run(ctx context.Context, name string, cutoff time.Time, trigger string) (*Run, error) {
	rec, err := r.Reconciler(name)
	if err != nil {
		return nil, err
	}
	c, err := r.engine(ctx)
	if err != nil {
		return nil, err
	}
	cutoff = cutoff.UTC().Truncate(time.Microsecond)
	var id int64
	err = r.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		err := tx.QueryRow(ctx, r.q.Get("RunInsert"), name, rec.RuleVersion(), cutoff, trigger, keel.ActorFrom(ctx),
			r.now(), c.ID()).Scan(&id)
		if err != nil {
			return fmt.Errorf("recording the run: %w", err)
		}
		return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "recon.run", Target: runTarget(id),
			Reason: trigger, Context: map[string]any{"reconciler": name, "cutoff": cutoff, "rule_version": rec.RuleVersion(),
				reasonCodeKey: "recon." + trigger}})
	})
	if err != nil {
		return nil, err
	}
	res := &runResult{}
	out, err := rec.Run(ctx, RunInput{RunID: id, Reconciler: name, RuleVersion: rec.RuleVersion(), Cutoff: cutoff})
	if err == nil {
		err = checkOutput(&out)
	}
	if err == nil {
		res.compared = out.Compared
		res.found = int64(len(out.Discrepancies))
		sortDiscrepancies(out.Discrepancies)
		res.totals = totalsOf(out.Discrepancies)
		res.digest = digestOf(rec.RuleVersion(), cutoff, &out)
		if out.Scope != nil {
			res.scope = out.Scope.Name
		}
		err = r.apply(ctx, name, id, cutoff, &out, res)
	}
	if err == nil {
		r.autoHeal(ctx, res)
	}
	if ferr := r.finish(ctx, id, res, err); ferr != nil {
		return nil, ferr
	}
	return r.GetRun(ctx, id)
}

// runResult collects a run's figures.
type runResult struct {
	compared, found                            int64
	totals                                     Totals
	digest, scope                              string
	applied                                    bool
	opened, healed, verified, resolved, reopen int64
	heal                                       []int64
}

func (r *Recon[TTx]) finish(ctx context.Context, id int64, res *runResult, runErr error) error {
	state, msg := "succeeded", ""
	if runErr != nil {
		state, msg = "failed", runErr.Error()
		if n := 1000; utf8.RuneCountInString(msg) > n {
			msg = string([]rune(msg)[:n])
		}
		if ctx.Err() != nil || errors.Is(runErr, context.Canceled) {
			// A run cut off by a stop is recorded as failed (the next run
			// compares again) but is not an error of anyone's.
			r.cfg.Logger.Info("reconciliation run stopped", "run", id)
		} else {
			r.cfg.Logger.Error("reconciliation run failed", "run", id, "error", runErr)
		}
	}
	totals, err := json.Marshal(res.totals)
	if err != nil || res.totals == nil {
		totals = []byte("{}")
	}
	_, err = r.db.Exec(context.WithoutCancel(ctx), r.q.Get("RunFinish"), id, state, r.now(), res.compared, res.found,
		string(totals), res.digest, res.applied, res.opened, res.healed, res.verified, res.resolved, res.reopen, msg,
		res.scope)
	if err != nil {
		return fmt.Errorf("recording the end of run %d: %w", id, err)
	}
	return nil
}

func sortDiscrepancies(ds []Discrepancy) {
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].Class != ds[j].Class {
			return ds[i].Class < ds[j].Class
		}
		return ds[i].Key < ds[j].Key
	})
}

func totalsOf(ds []Discrepancy) Totals {
	t := Totals{}
	for _, d := range ds {
		ct := t[d.Class]
		ct.Count++
		if d.Impact != 0 {
			if ct.Amounts == nil {
				ct.Amounts = map[string]int64{}
			}
			ct.Amounts[d.Currency] += d.Impact
		}
		t[d.Class] = ct
	}
	return t
}

// digestOf hashes a run's inputs and result in canonical form (sorted
// discrepancies, compacted evidence, map keys in order): two runs over the
// same inputs have the same digest.
func digestOf(rule string, cutoff time.Time, out *RunOutput) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n%d\n", rule, cutoff.UnixMicro(), out.Compared)
	if out.Scope != nil {
		fmt.Fprintf(h, "scope\x00%s\n", out.Scope.Name)
	}
	for _, d := range out.Discrepancies {
		ev, _ := evidenceText(d.Evidence)
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\x00%s\x00%t\x00%t\n", d.Class, d.Key, ev, d.SuggestedAction, d.Impact,
			d.Currency, d.SafeAutoHeal, d.NeedsApproval)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkEvidence wants each source's snapshot a JSON object, within
// MaxEvidence in all.
func checkEvidence(d *Discrepancy) error {
	if len(d.Evidence) == 0 {
		return fmt.Errorf("%w: discrepancy %s has no evidence", keeltype.ErrInvalidArgument, d.Key)
	}
	for src, raw := range d.Evidence {
		if err := checkText("evidence source", src, 64); err != nil {
			return err
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return fmt.Errorf("%w: discrepancy %s: evidence of %s is not a JSON object", keeltype.ErrInvalidArgument, d.Key, src)
		}
	}
	text, err := evidenceText(d.Evidence)
	if err != nil {
		return fmt.Errorf("%w: discrepancy %s: %v", keeltype.ErrInvalidArgument, d.Key, err)
	}
	if len(text) > MaxEvidence {
		return fmt.Errorf("%w: discrepancy %s: evidence is %d bytes; at most %d", keeltype.ErrInvalidArgument, d.Key, len(text), MaxEvidence)
	}
	return nil
}

// evidenceText is the stored form: sources in key order, each compacted.
func evidenceText(ev map[string]json.RawMessage) (string, error) {
	out := make(map[string]json.RawMessage, len(ev))
	for k, v := range ev {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return "", err
		}
		out[k] = b.Bytes()
	}
	raw, err := json.Marshal(out)
	return string(raw), err
}

// reasonCodeKey and reasonArgKey name, in an audit row's context, the code
// of a reason the reconciliation wrote by itself and its argument (a run
// number): the console says the reason in words from them (module/web
// registers the codes' words), and the English text stays for the API and
// the CLI.
const (
	reasonCodeKey = "reason_code"
	reasonArgKey  = "reason_arg"
)

func runTarget(id int64) string         { return "recon.run:" + strconv.FormatInt(id, 10) }
func discrepancyTarget(id int64) string { return "recon.discrepancy:" + strconv.FormatInt(id, 10) }

// apply stores a run's discrepancies and settles the ones it no longer
// finds, in one transaction with an audit entry per transition. A run over
// a cutoff older than one already applied only records its figures.
func (r *Recon[TTx]) apply(ctx context.Context, name string, runID int64, cutoff time.Time, out *RunOutput, res *runResult) error {
	ds := out.Discrepancies
	c, err := r.engine(ctx)
	if err != nil {
		return err
	}
	sys := keel.WithActor(ctx, SystemActor)
	return r.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, r.q.Get("RunApplyLock"), name); err != nil {
			return fmt.Errorf("waiting for the reconciler's other applies: %w", err)
		}
		var latest time.Time
		err := tx.QueryRow(ctx, r.q.Get("RunLatestAppliedCutoff"), name, true).Scan(&latest)
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("reading the latest applied run: %w", err)
		}
		if err == nil && cutoff.Before(latest) {
			return nil
		}
		res.applied = true
		if _, err := tx.Exec(ctx, r.q.Get("RunMarkApplied"), runID, true); err != nil {
			return fmt.Errorf("marking run %d applied: %w", runID, err)
		}
		for i := range ds {
			if err := r.applyOne(sys, c, tx, name, runID, &ds[i], res); err != nil {
				return err
			}
		}
		return r.settleGone(sys, c, tx, name, runID, out.Scope, res)
	})
}

func (r *Recon[TTx]) applyOne(ctx context.Context, c *keel.Client[TTx], tx keelsql.Tx[TTx], name string, runID int64, d *Discrepancy, res *runResult) error {
	ev, _ := evidenceText(d.Evidence)
	needs := r.NeedsApproval(d)
	now := r.now()
	var id int64
	err := tx.QueryRow(ctx, r.q.Get("DiscrepancyInsert"), name, string(d.Class), d.Key, ev, d.SuggestedAction, d.Impact,
		d.Currency, d.SafeAutoHeal, needs, runID, now).Scan(&id)
	switch {
	case err == nil:
		res.opened++
		if d.SafeAutoHeal && !needs {
			res.heal = append(res.heal, id)
		}
		return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "recon.discrepancy.open", Target: discrepancyTarget(id),
			Reason: "found by run " + strconv.FormatInt(runID, 10),
			Context: map[string]any{"reconciler": name, "class": d.Class, "key": d.Key, "impact": d.Impact, "currency": d.Currency,
				reasonCodeKey: "recon.found", reasonArgKey: runID}})
	case !isNotFound(err):
		return fmt.Errorf("recording discrepancy %s/%s: %w", d.Class, d.Key, err)
	}
	row, err := r.byKey(ctx, tx, name, d.Class, d.Key)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, r.q.Get("DiscrepancySeen"), row.ID, ev, runID, now, d.SuggestedAction, d.Impact, d.Currency,
		d.SafeAutoHeal, needs); err != nil {
		return fmt.Errorf("refreshing discrepancy %d: %w", row.ID, err)
	}
	to, ok := Next(row.State, EventSeen, needs)
	if !ok || to == row.State {
		return nil
	}
	n, err := tx.Exec(ctx, r.q.Get("DiscrepancyReopen"), row.ID, string(row.State), now)
	if err != nil || n == 0 {
		return err
	}
	res.reopen++
	if d.SafeAutoHeal && !needs {
		res.heal = append(res.heal, row.ID)
	}
	return c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "recon.discrepancy.reopen", Target: discrepancyTarget(row.ID),
		Reason:  "found again by run " + strconv.FormatInt(runID, 10),
		Context: map[string]any{"from": row.State, "generation": row.Generation + 1, reasonCodeKey: "recon.found_again", reasonArgKey: runID}})
}

// settleGone moves what the run did not find: fixes are verified, the rest
// resolved (and a pending or approved request for it cancelled). A partial
// run settles only what its scope covers.
func (r *Recon[TTx]) settleGone(ctx context.Context, c *keel.Client[TTx], tx keelsql.Tx[TTx], name string, runID int64, scope *Scope, res *runResult) error {
	type gone struct {
		id         int64
		state      State
		class, key string
	}
	rows, err := tx.Query(ctx, r.q.Get("DiscrepancyNotSeen"), name, runID)
	list, err := keelsql.CollectRows(rows, err, func(rs keelsql.Rows) (gone, error) {
		var g gone
		var st string
		err := rs.Scan(&g.id, &st, &g.class, &g.key)
		g.state = State(st)
		return g, err
	})
	if err != nil {
		return fmt.Errorf("listing discrepancies not found again: %w", err)
	}
	for _, g := range list {
		if scope != nil && (scope.Covers == nil || !scope.Covers(Class(g.class), g.key)) {
			continue // outside a partial run's scope: not known to be gone
		}
		to, ok := Next(g.state, EventGone, false)
		if !ok {
			continue
		}
		n, err := tx.Exec(ctx, r.q.Get("DiscrepancyVerify"), g.id, string(g.state), string(to), runID, r.now())
		if err != nil {
			return fmt.Errorf("settling discrepancy %d: %w", g.id, err)
		}
		if n == 0 {
			continue
		}
		action := "recon.discrepancy.verify"
		if to == StateVerified {
			res.verified++
		} else {
			res.resolved++
			action = "recon.discrepancy.resolve"
			if g.state == StateAwaitingApproval || g.state == StateApproved {
				row, err := r.get(ctx, tx, g.id)
				if err != nil {
					return err
				}
				if row.ApprovalID != nil {
					if err := r.approvals.CancelTx(ctx, tx, *row.ApprovalID, "the discrepancy is gone (run "+strconv.FormatInt(runID, 10)+")"); err != nil {
						return err
					}
				}
			}
		}
		if err := c.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: action, Target: discrepancyTarget(g.id),
			Reason: "not found by run " + strconv.FormatInt(runID, 10), Context: map[string]any{"from": g.state, "to": to,
				reasonCodeKey: "recon.not_found", reasonArgKey: runID}}); err != nil {
			return err
		}
	}
	return nil
}

// autoHeal executes the safe actions of what the run opened, each in its
// own transaction: one that fails stays open for an operator.
func (r *Recon[TTx]) autoHeal(ctx context.Context, res *runResult) {
	sys := keel.WithActor(ctx, SystemActor)
	for _, id := range res.heal {
		if err := r.execute(sys, id, "safe action of the reconciler", true); err != nil {
			r.cfg.Logger.Warn("reconciliation auto-heal failed", "discrepancy", id, "error", err)
			continue
		}
		res.healed++
	}
}
