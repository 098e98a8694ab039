package reservation

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// code returns the stable code of a module problem ("" if none).
func code(err error) string {
	var me *module.Error
	if errors.As(err, &me) {
		return me.Code
	}
	return ""
}

func TestCheckedInJustBeforeIsNotReleased(t *testing.T) {
	runBoth(t, testCheckedInJustBefore[pgx.Tx], testCheckedInJustBefore[*sql.Tx])
}

// A check-in committed one millisecond before the release transaction wins:
// the scan's claim no longer matches the row.
func testCheckedInJustBefore[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 2)
	r := paid(t, m, f.slot.ID, "u1")
	due := *r.ExpectedReleaseAt
	e.clock.Set(due.Add(-time.Millisecond))
	if _, err := m.CheckIn(ctx, r.ID, r.Version, ""); err != nil {
		t.Fatalf("check in: %v", err)
	}
	e.clock.Set(due)
	if run := mustScan(t, m); run.Released != 0 || run.Scanned != 0 {
		t.Fatalf("scan after check-in: %+v", run)
	}
	wantState(t, m, r.ID, StateCheckedIn)
	if n := held(t, m, f.slot.ID); n != 1 {
		t.Fatalf("held = %d, want 1 (checked in holds its place)", n)
	}
	noDrift(t, m)
}

func TestCheckInRacingTheReleaseLoses(t *testing.T) {
	runBoth(t, testCheckInRacing[pgx.Tx], testCheckInRacing[*sql.Tx])
}

// A check-in arriving while the release transaction holds the row waits for
// it and is then refused: never both.
func testCheckInRacing[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	var m *Module[TTx]
	var r *Reservation
	result := make(chan error, 1)
	hook := func(ctx context.Context, stage string, q keelsql.Querier) error {
		if stage == "claimed" {
			go func() {
				_, err := m.CheckIn(context.Background(), r.ID, 0, "")
				result <- err
			}()
		}
		return nil
	}
	m = e.module(t, withStageHook(hook))
	f := setup(t, m, 1)
	r = paid(t, m, f.slot.ID, "u1")
	e.clock.Set(*r.ExpectedReleaseAt)
	if run := mustScan(t, m); run.Released != 1 {
		t.Fatalf("scan: %+v", run)
	}
	if err := <-result; code(err) != "invalid_state" {
		t.Fatalf("check-in racing the release: %v, want invalid_state", err)
	}
	wantState(t, m, r.ID, StateReleased)
	_ = ctx
	noDrift(t, m)
}

func TestCancelledAndUnpaidAreNotReleased(t *testing.T) {
	runBoth(t, testCancelledAndUnpaid[pgx.Tx], testCancelledAndUnpaid[*sql.Tx])
}

func testCancelledAndUnpaid[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 3)
	cancelled := paid(t, m, f.slot.ID, "u1")
	if _, err := m.Cancel(ctx, cancelled.ID, cancelled.Version, "plans changed"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	unpaid, err := m.Book(ctx, f.slot.ID, "u2")
	if err != nil {
		t.Fatal(err)
	}
	if n := held(t, m, f.slot.ID); n != 1 {
		t.Fatalf("held = %d, want 1 (the unpaid booking)", n)
	}
	// Past the release point but within the unpaid hold (15 min default
	// payment window from t0 - the clock is at t0).
	e.clock.Set(t0.Add(14 * time.Minute))
	if run := mustScan(t, m); run.Released != 0 || run.HoldsExpired != 0 {
		t.Fatalf("scan: %+v", run)
	}
	wantState(t, m, cancelled.ID, StateCancelled)
	wantState(t, m, unpaid.ID, StatePendingPayment)
	// The unpaid hold lapses: expired, its place returned, never "released".
	e.clock.Set(t0.Add(16 * time.Minute))
	if run := mustScan(t, m); run.Released != 0 || run.HoldsExpired != 1 {
		t.Fatalf("scan after the hold: %+v", run)
	}
	wantState(t, m, unpaid.ID, StateExpired)
	if _, err := m.Pay(ctx, unpaid.ID, 0); code(err) != "invalid_state" {
		t.Fatalf("paying an expired booking: %v", err)
	}
	if n := held(t, m, f.slot.ID); n != 0 {
		t.Fatalf("held = %d, want 0", n)
	}
	noDrift(t, m)
}

func TestAlreadyReleasedIsReleasedOnce(t *testing.T) {
	runBoth(t, testAlreadyReleased[pgx.Tx], testAlreadyReleased[*sql.Tx])
}

func testAlreadyReleased[TTx any](t *testing.T, e *env[TTx]) {
	m := e.module(t)
	f := setup(t, m, 2)
	r := paid(t, m, f.slot.ID, "u1")
	paid(t, m, f.slot.ID, "u2")
	e.clock.Set(r.ExpectedReleaseAt.Add(time.Minute))
	if run := mustScan(t, m); run.Released != 2 {
		t.Fatalf("first scan: %+v", run)
	}
	if run := mustScan(t, m); run.Released != 0 || run.Scanned != 0 {
		t.Fatalf("second scan: %+v", run)
	}
	// The precise job of an already released reservation finds nothing.
	p, err := m.newPass(context.Background(), "precise")
	if err != nil {
		t.Fatal(err)
	}
	cands, _, err := m.releaseClaimed(context.Background(), p, m.claimOne(p, Candidate{ID: r.ID, Version: r.Version}, false))
	if err != nil || len(cands) != 0 {
		t.Fatalf("precise claim of a released reservation: %v %v", cands, err)
	}
	if n := held(t, m, f.slot.ID); n != 0 {
		t.Fatalf("held = %d", n)
	}
	hist, _ := m.History(context.Background(), r.ID)
	releases := 0
	for _, h := range hist {
		if h.ToState == StateReleased {
			releases++
		}
	}
	if releases != 1 {
		t.Fatalf("%d release entries in history", releases)
	}
	noDrift(t, m)
}

func TestRestoreAfterAppeal(t *testing.T) {
	runBoth(t, testRestoreAfterAppeal[pgx.Tx], testRestoreAfterAppeal[*sql.Tx])
}

// Within the appeal window and while the slot has room, a released
// reservation is restored, its no-show voided; it is never released again
// and can be checked in.
func testRestoreAfterAppeal[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 1)
	r := paid(t, m, f.slot.ID, "u1")
	e.clock.Set(*r.ExpectedReleaseAt)
	mustScan(t, m)
	rec, err := m.NoShows(ctx, "u1")
	if err != nil || rec.Total != 1 || rec.InWindow != 1 {
		t.Fatalf("no-show record after release: %+v %v", rec, err)
	}
	e.clock.Add(29 * time.Minute)
	got, err := m.Restore(ctx, r.ID, 0, "arrived, phone was dead")
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got.State != StateRestored || held(t, m, f.slot.ID) != 1 {
		t.Fatalf("restored: %+v held %d", got, held(t, m, f.slot.ID))
	}
	rec, _ = m.NoShows(ctx, "u1")
	if rec.InWindow != 0 || rec.Voided != 1 {
		t.Fatalf("no-show after restore: %+v", rec)
	}
	e.clock.Add(time.Hour)
	if run := mustScan(t, m); run.Released != 0 {
		t.Fatalf("a restored reservation was released again: %+v", run)
	}
	if _, err := m.CheckIn(ctx, r.ID, 0, ""); err != nil {
		t.Fatalf("check in after restore: %v", err)
	}
	notes, _ := m.Notifications(ctx, r.ID)
	if !hasKind(notes, kindRelease) || !hasKind(notes, kindRestore) {
		t.Fatalf("notifications: %+v", notes)
	}
	noDrift(t, m)
}

func hasKind(list []Notification, kind string) bool {
	for _, n := range list {
		if n.Kind == kind {
			return true
		}
	}
	return false
}

func TestAppealWindowPassed(t *testing.T) {
	runBoth(t, testAppealWindowPassed[pgx.Tx], testAppealWindowPassed[*sql.Tx])
}

func testAppealWindowPassed[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 1)
	r := paid(t, m, f.slot.ID, "u1")
	e.clock.Set(*r.ExpectedReleaseAt)
	mustScan(t, m)
	e.clock.Add(30*time.Minute + time.Second)
	if _, err := m.Restore(ctx, r.ID, 0, "too late"); code(err) != "appeal_window_closed" {
		t.Fatalf("restore after the window: %v", err)
	}
	wantState(t, m, r.ID, StateReleased)
	if n := held(t, m, f.slot.ID); n != 0 {
		t.Fatalf("held = %d", n)
	}
}

func TestRestoreRefusedWhenSlotTaken(t *testing.T) {
	runBoth(t, testRestoreSlotTaken[pgx.Tx], testRestoreSlotTaken[*sql.Tx])
}

func testRestoreSlotTaken[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 1)
	r := paid(t, m, f.slot.ID, "u1")
	e.clock.Set(*r.ExpectedReleaseAt)
	mustScan(t, m)
	if _, err := m.Book(ctx, f.slot.ID, "u2"); err != nil {
		t.Fatalf("booking the freed place: %v", err)
	}
	if _, err := m.Restore(ctx, r.ID, 0, "came back"); code(err) != "slot_taken" {
		t.Fatalf("restore into a full slot: %v", err)
	}
	wantState(t, m, r.ID, StateReleased)
	noDrift(t, m)
}

func TestWaitlistPromotion(t *testing.T) {
	runBoth(t, testWaitlistPromotion[pgx.Tx], testWaitlistPromotion[*sql.Tx])
}

// A release in a full slot with a waitlist offers the place to the first
// waiting user in the same transaction; without a waitlist the place is
// simply free.
func testWaitlistPromotion[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 1)
	r := paid(t, m, f.slot.ID, "u1")
	if _, err := m.Book(ctx, f.slot.ID, "u2"); code(err) != "slot_full" {
		t.Fatalf("booking a full slot: %v", err)
	}
	for _, u := range []string{"u2", "u3"} {
		if _, err := m.JoinWaitlist(ctx, f.slot.ID, u); err != nil {
			t.Fatalf("waitlist %s: %v", u, err)
		}
	}
	if _, err := m.JoinWaitlist(ctx, f.slot.ID, "u2"); code(err) != "already_waiting" {
		t.Fatalf("joining twice: %v", err)
	}
	e.clock.Set(*r.ExpectedReleaseAt)
	run := mustScan(t, m)
	if run.Released != 1 || run.Promoted != 1 {
		t.Fatalf("scan: %+v", run)
	}
	list, err := m.Waitlist(ctx, f.slot.ID)
	if err != nil || list[0].State != "offered" || list[1].State != "waiting" {
		t.Fatalf("waitlist: %+v %v", list, err)
	}
	offer := wantState(t, m, list[0].ReservationID, StatePendingPayment)
	if offer.UserID != "u2" || !offer.HoldExpiresAt.Equal(e.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("offer: %+v", offer)
	}
	if s, _ := m.slot(ctx, f.slot.ID); s.Held != 1 || s.Waiting != 1 {
		t.Fatalf("slot after promotion: %+v", s)
	}
	notes, _ := m.Notifications(ctx, offer.ID)
	if !hasKind(notes, kindOffer) {
		t.Fatalf("no offer notice: %+v", notes)
	}
	// The offer lapses unpaid: expired, and the next user is offered.
	e.clock.Add(10 * time.Minute)
	run = mustScan(t, m)
	if run.HoldsExpired != 1 || run.Promoted != 1 {
		t.Fatalf("scan after the offer lapsed: %+v", run)
	}
	wantState(t, m, offer.ID, StateExpired)
	list, _ = m.Waitlist(ctx, f.slot.ID)
	next := wantState(t, m, list[1].ReservationID, StatePendingPayment)
	if _, err := m.Pay(ctx, next.ID, 0); err != nil {
		t.Fatalf("paying the offer: %v", err)
	}
	noDrift(t, m)
}
