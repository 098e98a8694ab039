package keelrecon_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/keeltype"
)

// seedLedgers gives one discrepancy of each kind the test reconciler finds:
// a missing row of ours (small: no approval), a row the channel lacks
// (always needs approval), an amount off by more than the threshold, and a
// status that differs (safe to heal by itself). Two rows agree.
func seedLedgers[TTx any](e *env[TTx]) {
	e.seed("t_theirs", "p-missing", 5_000, "paid")
	e.seed("t_ours", "p-extra", 2_000, "paid")
	e.seed("t_ours", "p-amount", 10_000, "paid")
	e.seed("t_theirs", "p-amount", 60_000, "paid")
	e.seed("t_ours", "p-status", 3_000, "pending")
	e.seed("t_theirs", "p-status", 3_000, "paid")
	for _, k := range []string{"p-ok-1", "p-ok-2"} {
		e.seed("t_ours", k, 1_000, "paid")
		e.seed("t_theirs", k, 1_000, "paid")
	}
}

func TestRerunGivesIdenticalResults(t *testing.T) {
	both(t, testRerun[pgx.Tx], testRerun[*sql.Tx])
}

func testRerun[TTx any](t *testing.T, e *env[TTx]) {
	// No safe auto-heal would change the data between the runs if the
	// status row were healed, so the comparison starts after the first run
	// settled: run 2 and 3 see the same data at the same cutoff.
	seedLedgers(e)
	cutoff := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	first := e.run(cutoff)
	if first.Compared != 6 || first.Found != 4 || first.Opened != 4 || first.Healed != 1 {
		t.Fatalf("first run: compared %d found %d opened %d healed %d", first.Compared, first.Found, first.Opened, first.Healed)
	}
	// The heal fixed p-status; rerun twice over the same cutoff.
	a := e.run(cutoff)
	b := e.run(cutoff)
	if a.Digest != b.Digest || a.Compared != b.Compared || a.Found != b.Found || a.Digest == "" {
		t.Fatalf("reruns differ: %+v vs %+v", a, b)
	}
	if a.Found != 3 || a.Verified != 1 || b.Verified != 0 || b.Opened != 0 || b.Reopened != 0 {
		t.Fatalf("rerun figures: a found %d verified %d; b opened %d reopened %d verified %d", a.Found, a.Verified, b.Opened, b.Reopened, b.Verified)
	}
	for _, r := range []*keelrecon.Run{a, b} {
		if r.Totals[keelrecon.AmountMismatch].Amounts["CNY"] != 50_000 || r.Totals[keelrecon.MissingTheirs].Amounts["CNY"] != -2_000 ||
			r.Totals[keelrecon.MissingOurs].Count != 1 || r.RuleVersion != "v1" || !r.Cutoff.Equal(cutoff) {
			t.Fatalf("run %d totals/cutoff: %+v %s", r.ID, r.Totals, r.Cutoff)
		}
	}
	list, err := e.recon.ListDiscrepancies(context.Background(), keelrecon.DiscrepancyFilter{})
	if err != nil || len(list) != 4 {
		t.Fatalf("reruns duplicated discrepancies: %d, %v", len(list), err)
	}
	if got := e.byKey(keelrecon.StatusMismatch, "p-status"); got.State != keelrecon.StateVerified {
		t.Fatalf("healed status row is %s", got.State)
	}
	if e.audits("recon.discrepancy.open") != 4 || e.audits("recon.discrepancy.autoheal") != 1 || e.audits("recon.discrepancy.verify") != 1 {
		t.Fatal("run transitions are not audited once each")
	}
}

func TestFourEyes(t *testing.T) {
	both(t, testFourEyes[pgx.Tx], testFourEyes[*sql.Tx])
}

func testFourEyes[TTx any](t *testing.T, e *env[TTx]) {
	seedLedgers(e)
	e.run(time.Time{})
	big := e.byKey(keelrecon.AmountMismatch, "p-amount")
	if !big.NeedsApproval || big.Impact != 50_000 || big.Currency != "CNY" {
		t.Fatalf("over-threshold discrepancy: %+v", big)
	}
	// Over the threshold: one operator cannot execute it alone.
	if _, err := e.recon.Execute(as("alice"), big.ID, "fix the amount now"); !errors.Is(err, keelrecon.ErrApprovalRequired) {
		t.Fatalf("execute without approval: %v", err)
	}
	if e.rec.executed.Load() != 1 { // the auto-heal only
		t.Fatalf("executed %d", e.rec.executed.Load())
	}
	d, err := e.recon.RequestApproval(as("alice"), big.ID, "channel statement shows 600.00")
	if err != nil || d.State != keelrecon.StateAwaitingApproval || d.ApprovalID == nil || d.ActionID == "" {
		t.Fatalf("request: %+v %v", d, err)
	}
	// The requester cannot approve, reject or get around it through the
	// general approvals API.
	if _, err := e.recon.Approve(as("alice"), big.ID, "I approve myself"); !errors.Is(err, keelrecon.ErrSelfApproval) {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := e.recon.Reject(as("alice"), big.ID, "I reject myself"); !errors.Is(err, keelrecon.ErrSelfApproval) {
		t.Fatalf("self-rejection: %v", err)
	}
	if _, err := e.recon.Approvals().Approve(as("alice"), *d.ApprovalID, "I approve myself"); !errors.Is(err, keelrecon.ErrSelfApproval) {
		t.Fatalf("self-approval through approvals: %v", err)
	}
	if got, _ := e.recon.GetDiscrepancy(context.Background(), big.ID); got.State != keelrecon.StateAwaitingApproval {
		t.Fatalf("refused approval changed the state to %s", got.State)
	}
	if e.audits("approval.approve") != 0 || e.audits("recon.discrepancy.approve") != 0 {
		t.Fatal("a refused approval was audited as given")
	}
	if _, err := e.recon.Execute(as("bob"), big.ID, "execute before approval"); !errors.Is(err, keelrecon.ErrApprovalRequired) {
		t.Fatalf("execute while awaiting approval: %v", err)
	}
	awaiting, err := e.recon.Approvals().Awaiting(context.Background(), "user:bob", 50)
	if err != nil || len(awaiting) != 1 || awaiting[0].Amount != 50_000 {
		t.Fatalf("bob's queue: %v %v", awaiting, err)
	}
	if mine, _ := e.recon.Approvals().Awaiting(context.Background(), "user:alice", 50); len(mine) != 0 {
		t.Fatalf("alice's own request awaits her: %v", mine)
	}
	d, err = e.recon.Approve(as("bob"), big.ID, "matches the channel statement")
	if err != nil || d.State != keelrecon.StateApproved {
		t.Fatalf("second operator's approval: %+v %v", d, err)
	}
	ap, _ := e.recon.Approvals().Get(context.Background(), *d.ApprovalID)
	if ap.DecidedBy != "user:bob" || ap.RequestedBy != "user:alice" || ap.State != keelrecon.ApprovalApproved {
		t.Fatalf("approval: %+v", ap)
	}
	d, err = e.recon.Execute(as("alice"), big.ID, "apply the approved fix")
	if err != nil || d.State != keelrecon.StateExecuted || d.ExecutedBy != "user:alice" {
		t.Fatalf("execute: %+v %v", d, err)
	}
	if n := e.count("SELECT count(*) FROM t_fix WHERE action_id = $1", d.ActionID); n != 1 {
		t.Fatalf("fix rows for %s: %d", d.ActionID, n)
	}
	// Below the threshold: one operator executes directly.
	small := e.byKey(keelrecon.MissingOurs, "p-missing")
	if small.NeedsApproval {
		t.Fatal("a 50.00 fix needs approval")
	}
	if d, err := e.recon.Execute(as("carol"), small.ID, "book the missing payment"); err != nil || d.State != keelrecon.StateExecuted {
		t.Fatalf("small execute: %+v %v", d, err)
	}
	// The next run verifies both fixes.
	run := e.run(time.Time{})
	if run.Verified != 3 { // the two fixes and the auto-healed status (verified by this, its first next run)
		t.Fatalf("next run verified %d", run.Verified)
	}
	for _, k := range []struct {
		c keelrecon.Class
		k string
	}{{keelrecon.AmountMismatch, "p-amount"}, {keelrecon.MissingOurs, "p-missing"}} {
		if got := e.byKey(k.c, k.k); got.State != keelrecon.StateVerified || got.VerifiedRunID == nil || *got.VerifiedRunID != run.ID {
			t.Fatalf("%s after the next run: %s", k.k, got.State)
		}
	}
	for action, want := range map[string]int{"approval.request": 1, "approval.approve": 1, "approval.execute": 1,
		"recon.discrepancy.request": 1, "recon.discrepancy.approve": 1, "recon.discrepancy.execute": 2, "recon.discrepancy.verify": 3} {
		if got := e.audits(action); got != want {
			t.Errorf("audit %s: %d entries, want %d", action, got, want)
		}
	}
}

func TestRejectedStaysRejected(t *testing.T) {
	both(t, testReject[pgx.Tx], testReject[*sql.Tx])
}

func testReject[TTx any](t *testing.T, e *env[TTx]) {
	seedLedgers(e)
	e.run(time.Time{})
	extra := e.byKey(keelrecon.MissingTheirs, "p-extra")
	if !extra.NeedsApproval {
		t.Fatal("a reversal must need approval whatever its amount")
	}
	if _, err := e.recon.RequestApproval(as("alice"), extra.ID, "reverse the extra payment"); err != nil {
		t.Fatal(err)
	}
	d, err := e.recon.Reject(as("bob"), extra.ID, "the channel file is late, wait")
	if err != nil || d.State != keelrecon.StateRejected {
		t.Fatalf("reject: %+v %v", d, err)
	}
	if _, err := e.recon.Execute(as("bob"), extra.ID, "try anyway"); !errors.Is(err, keeltype.ErrInvalidState) {
		t.Fatalf("execute rejected: %v", err)
	}
	if got := e.byKey(keelrecon.MissingTheirs, "p-extra"); got.State != keelrecon.StateRejected {
		t.Fatalf("after rejection: %s", got.State)
	}
	e.run(time.Time{})
	if got := e.byKey(keelrecon.MissingTheirs, "p-extra"); got.State != keelrecon.StateRejected {
		t.Fatalf("a rerun moved a rejected discrepancy to %s", got.State)
	}
	// The channel's file arrives: the discrepancy is gone by itself.
	e.seed("t_theirs", "p-extra", 2_000, "paid")
	e.run(time.Time{})
	if got := e.byKey(keelrecon.MissingTheirs, "p-extra"); got.State != keelrecon.StateResolved {
		t.Fatalf("gone after rejection: %s", got.State)
	}
}

func TestConcurrentExecuteOnce(t *testing.T) {
	both(t, testConcurrentExecute[pgx.Tx], testConcurrentExecute[*sql.Tx])
}

func testConcurrentExecute[TTx any](t *testing.T, e *env[TTx]) {
	seedLedgers(e)
	e.run(time.Time{})
	before := e.rec.executed.Load()
	big := e.byKey(keelrecon.AmountMismatch, "p-amount")
	if _, err := e.recon.RequestApproval(as("alice"), big.ID, "channel statement shows 600.00"); err != nil {
		t.Fatal(err)
	}
	d, err := e.recon.Approve(as("bob"), big.ID, "matches the channel statement")
	if err != nil {
		t.Fatal(err)
	}
	small := e.byKey(keelrecon.MissingOurs, "p-missing")
	// Eight executions of each at once: through the discrepancy, and
	// (for the approved one) through the general approvals API too.
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(3)
		go func() {
			defer wg.Done()
			<-start
			_, err := e.recon.Execute(as("carol"), big.ID, "double click on execute")
			errs <- err
		}()
		go func() {
			defer wg.Done()
			<-start
			_, err := e.recon.Approvals().Execute(as("dave"), *d.ApprovalID, "retry of a lost response")
			errs <- err
		}()
		go func() {
			defer wg.Done()
			<-start
			_, err := e.recon.Execute(as("erin"), small.ID, "two operators at once")
			if err == nil {
				err = errSmall
			}
			errs <- err
			_ = i
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	var okBig, okSmall int
	for err := range errs {
		switch {
		case err == nil:
			okBig++
		case errors.Is(err, errSmall):
			okSmall++
		case errors.Is(err, keelrecon.ErrAlreadyExecuted):
		default:
			t.Errorf("concurrent execute: %v", err)
		}
	}
	if okBig != 1 || okSmall != 1 {
		t.Fatalf("successful executions: approved %d, small %d; want 1 and 1", okBig, okSmall)
	}
	if got := e.rec.executed.Load() - before; got != 2 {
		t.Fatalf("the reconciler executed %d actions, want 2", got)
	}
	if n := e.count("SELECT count(*) FROM t_fix WHERE key IN ('p-amount', 'p-missing')"); n != 2 {
		t.Fatalf("fix rows: %d", n)
	}
	if n := e.audits("recon.discrepancy.execute"); n != 2 {
		t.Fatalf("execute audits: %d", n)
	}
}

var errSmall = errors.New("small executed")

func TestBadInputWritesNothing(t *testing.T) {
	both(t, testBadInput[pgx.Tx], testBadInput[*sql.Tx])
}

func testBadInput[TTx any](t *testing.T, e *env[TTx]) {
	seedLedgers(e)
	e.run(time.Time{})
	big := e.byKey(keelrecon.AmountMismatch, "p-amount")
	for name, reason := range map[string]string{"blank": "   ", "short": "ok", "nul": "fix\x00it now", "long": strings.Repeat("长", 1001),
		"bad utf-8": "fix \xff now"} {
		if _, err := e.recon.RequestApproval(as("alice"), big.ID, reason); !errors.Is(err, keeltype.ErrInvalidArgument) {
			t.Errorf("%s reason: %v", name, err)
		}
	}
	if _, err := e.recon.RequestApproval(as("alice"), 999999, "no such discrepancy"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := e.recon.Approve(as("bob"), big.ID, "nothing was requested"); !errors.Is(err, keeltype.ErrInvalidState) {
		t.Errorf("approve without request: %v", err)
	}
	if _, err := e.recon.Approvals().Approve(as("bob"), 424242, "no such approval"); !errors.Is(err, keeltype.ErrNotFound) {
		t.Errorf("unknown approval: %v", err)
	}
	if _, err := e.recon.Run(as("alice"), "nope", time.Time{}); !errors.Is(err, keeltype.ErrNotFound) {
		t.Errorf("unknown reconciler: %v", err)
	}
	if _, err := e.recon.Run(as("alice"), "ledger", time.Now().Add(time.Hour)); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Errorf("future cutoff: %v", err)
	}
	if _, err := e.recon.Approvals().Request(as("alice"), keelrecon.Request{Kind: "unknown.kind", Target: "x", ActionID: "a",
		Reason: "valid reason"}); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Errorf("unknown kind: %v", err)
	}
	if got := e.byKey(keelrecon.AmountMismatch, "p-amount"); got.State != keelrecon.StateOpen || got.ApprovalID != nil {
		t.Fatalf("bad input changed the discrepancy: %+v", got)
	}
	if n := e.count("SELECT count(*) FROM keel_approval"); n != 0 {
		t.Fatalf("bad input wrote %d approvals", n)
	}
	if e.audits("approval.request") != 0 || e.audits("recon.discrepancy.request") != 0 {
		t.Fatal("bad input was audited")
	}
}

func TestReconcilerOutputChecked(t *testing.T) {
	both(t, testOutputChecked[pgx.Tx], testOutputChecked[*sql.Tx])
}

func testOutputChecked[TTx any](t *testing.T, e *env[TTx]) {
	// A currency-less impact is refused as a whole run: nothing applied.
	e.seed("t_theirs", "p-missing", 5_000, "paid")
	e.exec("UPDATE t_theirs SET status = 'x' WHERE key = 'p-missing'")
	r, err := keelrecon.New(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(&badRec[TTx]{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), e.client); err != nil {
		t.Fatal(err)
	}
	run, err := r.Run(as("alice"), "bad", time.Time{})
	if err != nil || run.State != "failed" || !strings.Contains(run.Error, "currency") || run.Applied {
		t.Fatalf("bad output: %+v %v", run, err)
	}
	if n := e.count("SELECT count(*) FROM keel_recon_discrepancy"); n != 0 {
		t.Fatalf("a refused run wrote %d discrepancies", n)
	}
}

func TestOlderCutoffRecordsButDoesNotApply(t *testing.T) {
	both(t, testOlderCutoff[pgx.Tx], testOlderCutoff[*sql.Tx])
}

func testOlderCutoff[TTx any](t *testing.T, e *env[TTx]) {
	seedLedgers(e)
	now := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	e.run(now)
	// Before the data existed: nothing to compare. Applied, it would
	// resolve every discrepancy; as a late run it only records its figures.
	late := e.run(now.Add(-2 * time.Hour))
	if late.Applied || late.Found != 0 || late.Resolved != 0 {
		t.Fatalf("late run: applied %t found %d resolved %d", late.Applied, late.Found, late.Resolved)
	}
	if got := e.byKey(keelrecon.AmountMismatch, "p-amount"); got.State != keelrecon.StateOpen {
		t.Fatalf("a late run moved a discrepancy to %s", got.State)
	}
	// Concurrent runs over two cutoffs: whichever order they apply in, the
	// newer cutoff's result stands.
	var wg sync.WaitGroup
	for _, c := range []time.Time{now.Add(-2 * time.Hour), now.Add(time.Second)} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.recon.Run(as("alice"), "ledger", c); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := e.byKey(keelrecon.AmountMismatch, "p-amount"); got.State != keelrecon.StateOpen {
		t.Fatalf("after concurrent runs: %s", got.State)
	}
}

// TestPartialRunSettlesOnlyItsScope: an incremental run compares part of
// the data; what it does not report inside its scope is settled, what lies
// outside keeps its state however the data changed, and the next complete
// run settles that. The run records its scope, and it counts in the digest.
func TestPartialRunSettlesOnlyItsScope(t *testing.T) {
	both(t, testPartialRun[pgx.Tx], testPartialRun[*sql.Tx])
}

func testPartialRun[TTx any](t *testing.T, e *env[TTx]) {
	seedLedgers(e)
	cutoff := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	full := e.run(cutoff)
	if full.Opened != 4 || full.Healed != 1 || full.Scope != "" {
		t.Fatalf("full run: opened %d healed %d scope %q", full.Opened, full.Healed, full.Scope)
	}
	// Both rows are fixed in the data; the partial run looks at one.
	e.exec("INSERT INTO t_ours (key, amount, status, at) VALUES ('p-missing', 5000, 'paid', $1)", time.Now().Add(-time.Hour).UnixMicro())
	e.exec("DELETE FROM t_ours WHERE key = 'p-extra'")
	e.rec.only = []string{"p-missing", "p-ok-1"}
	partial := e.run(cutoff.Add(time.Second))
	if partial.Scope != "keys p-missing, p-ok-1" || partial.Compared != 2 || partial.Found != 0 {
		t.Fatalf("partial run: scope %q compared %d found %d", partial.Scope, partial.Compared, partial.Found)
	}
	if partial.Resolved != 1 || partial.Verified != 0 {
		t.Fatalf("partial run settled: resolved %d verified %d; want only p-missing resolved", partial.Resolved, partial.Verified)
	}
	for key, want := range map[string]keelrecon.State{"p-missing": keelrecon.StateResolved, "p-extra": keelrecon.StateOpen,
		"p-amount": keelrecon.StateOpen, "p-status": keelrecon.StateAutoHealed} {
		var d *keelrecon.DiscrepancyRow
		list, err := e.recon.ListDiscrepancies(context.Background(), keelrecon.DiscrepancyFilter{Key: key})
		if err != nil || len(list) != 1 {
			t.Fatalf("%s: %v %d", key, err, len(list))
		}
		d = list[0]
		if d.State != want {
			t.Fatalf("%s after the partial run: %s, want %s", key, d.State, want)
		}
	}
	again := e.run(cutoff.Add(time.Second))
	if again.Digest != partial.Digest {
		t.Fatal("the same partial run over the same data gave another digest")
	}
	e.rec.only = nil
	whole := e.run(cutoff.Add(2 * time.Second))
	if whole.Scope != "" || whole.Found != 1 || whole.Resolved != 1 || whole.Verified != 1 {
		t.Fatalf("complete run: scope %q found %d resolved %d verified %d; want p-extra resolved, p-status verified",
			whole.Scope, whole.Found, whole.Resolved, whole.Verified)
	}
	if d := e.byKey(keelrecon.MissingTheirs, "p-extra"); d.State != keelrecon.StateResolved {
		t.Fatalf("p-extra after the complete run: %s", d.State)
	}
}

// A caller's time.Now() taken just before Run is not in the future: the
// line keeps instants in microseconds (both databases store them exactly),
// and a cutoff with nanoseconds in the same microsecond as the clock once
// came out after the truncated clock and was refused.
func TestCutoffNowIsNotInTheFuture(t *testing.T) {
	now := time.Now().Truncate(time.Microsecond).Add(999 * time.Nanosecond)
	clock := func() time.Time { return now }
	bothClock(t, clock,
		func(t *testing.T, e *env[pgx.Tx]) { testCutoffNow(t, e, now) },
		func(t *testing.T, e *env[*sql.Tx]) { testCutoffNow(t, e, now) })
}

func testCutoffNow[TTx any](t *testing.T, e *env[TTx], now time.Time) {
	seedLedgers(e)
	run := e.run(now)
	if want := now.UTC().Truncate(time.Microsecond); !run.Cutoff.Equal(want) {
		t.Fatalf("cutoff stored %s, want %s", run.Cutoff, want)
	}
	// The next microsecond is still the future, and refused before
	// anything is written.
	runs := e.count("SELECT count(*) FROM keel_recon_run")
	if _, err := e.recon.Run(as("ops-alice"), "ledger", now.Add(time.Microsecond)); !errors.Is(err, keeltype.ErrInvalidArgument) {
		t.Fatalf("a cutoff one microsecond ahead: %v", err)
	}
	if n := e.count("SELECT count(*) FROM keel_recon_run"); n != runs {
		t.Fatalf("the refused run wrote a row: %d runs, had %d", n, runs)
	}
}
