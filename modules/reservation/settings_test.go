package reservation

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
)

func TestGraySwitch(t *testing.T) {
	runBoth(t, testGraySwitch[pgx.Tx], testGraySwitch[*sql.Tx])
}

// Off releases nothing; dry-run only counts (and logs) what it would
// release; on releases. Each change applies at once and is audited, the
// mode change as its own action.
func testGraySwitch[TTx any](t *testing.T, e *env[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:ops")
	m := e.module(t)
	f := setup(t, m, 2)
	r := paid(t, m, f.slot.ID, "u1")
	e.clock.Set(*r.ExpectedReleaseAt)
	setMode := func(mode Mode) {
		t.Helper()
		c, err := m.Category(ctx, "ws")
		if err != nil {
			t.Fatal(err)
		}
		s := CategorySettings{NameZH: c.NameZH, NameEN: c.NameEN, GraceMinutes: c.GraceMinutes, Bands: c.Bands,
			ReminderMinutes: c.ReminderMinutes, AppealMinutes: c.AppealMinutes, HoldMinutes: c.HoldMinutes, ReleaseMode: mode}
		if _, err := m.UpdateCategory(ctx, "ws", c.Version, s, "gray rollout step"); err != nil {
			t.Fatalf("mode %s: %v", mode, err)
		}
	}
	setMode(ModeOff)
	if run := mustScan(t, m); run.Scanned != 0 || run.DryRun != 0 {
		t.Fatalf("off: %+v", run)
	}
	setMode(ModeDryRun)
	relays := countJobs(t, m, KindRelay)
	if run := mustScan(t, m); run.Released != 0 || run.DryRun != 1 {
		t.Fatalf("dry run: %+v", run)
	}
	if n := countJobs(t, m, KindRelay); n != relays {
		t.Fatalf("a dry run queued work: %d relays", n-relays)
	}
	// The assist honours the switch too.
	if s, err := m.SlotAvailability(ctx, f.slot.ID); err != nil || s.Held != 1 {
		t.Fatalf("assist in dry run: %+v %v", s, err)
	}
	wantState(t, m, r.ID, StatePaid)
	setMode(ModeOn)
	if run := mustScan(t, m); run.Released != 1 {
		t.Fatalf("on: %+v", run)
	}
	modes := auditActions(t, m, "reservation.release_mode")
	if len(modes) != 3 || !strings.Contains(modes[0], "by user:ops: gray rollout step") {
		t.Fatalf("mode audits: %v", modes)
	}
	if _, err := m.UpdateCategory(ctx, "ws", 1, defaultSettings(), "stale"); code(err) != "version_conflict" {
		t.Fatalf("stale version: %v", err)
	}
}

func TestTimeBandsInTheBusinessZone(t *testing.T) {
	runBoth(t, testTimeBands[pgx.Tx], testTimeBands[*sql.Tx])
}

// Peak hours (business zone) get a short grace, quiet hours a long one, the
// rest the category default; the point is stored in UTC.
func testTimeBands[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	s := defaultSettings()
	s.GraceMinutes = 10
	s.Bands = []Band{{From: "11:00", To: "13:00", GraceMinutes: 5}, {From: "22:00", To: "08:00", GraceMinutes: 20}}
	if _, err := m.CreateCategory(ctx, "ws", s, "bands"); err != nil {
		t.Fatal(err)
	}
	res, _ := m.CreateResource(ctx, "ws", "A-01", "")
	sh, _ := time.LoadLocation("Asia/Shanghai")
	for _, c := range []struct {
		local string
		grace int
	}{{"2030-01-07 11:30", 5}, {"2030-01-07 13:00", 10}, {"2030-01-07 23:00", 20}, {"2030-01-08 07:59", 20}, {"2030-01-07 10:59", 10}} {
		start, _ := time.ParseInLocation("2006-01-02 15:04", c.local, sh)
		slot, err := m.CreateSlot(ctx, res.ID, start, start.Add(time.Hour), 1)
		if err != nil {
			t.Fatal(err)
		}
		r := paid(t, m, slot.ID, "u")
		if r.GraceMinutes != c.grace || !r.ExpectedReleaseAt.Equal(start.Add(time.Duration(c.grace)*time.Minute)) {
			t.Fatalf("start %s: grace %d, release %v; want %d", c.local, r.GraceMinutes, r.ExpectedReleaseAt, c.grace)
		}
		if r.ExpectedReleaseAt.Location() != time.UTC {
			t.Fatalf("release point not in UTC: %v", r.ExpectedReleaseAt)
		}
	}
	s.Bands = append(s.Bands, Band{From: "12:00", To: "14:00", GraceMinutes: 1})
	if _, err := m.UpdateCategory(ctx, "ws", 1, s, "overlap"); code(err) != "invalid_argument" {
		t.Fatalf("overlapping bands: %v", err)
	}
}

func TestNoShowPolicyRestrictsAndIsReversible(t *testing.T) {
	runBoth(t, testNoShowPolicy[pgx.Tx], testNoShowPolicy[*sql.Tx])
}

// Off by default (no-shows recorded, never punished); enabled with 2 in 365
// days, the second no-show restricts booking in the release transaction,
// audited; lifting or resetting reverses it, audited.
func testNoShowPolicy[TTx any](t *testing.T, e *env[TTx]) {
	ctx := keel.WithActor(context.Background(), "user:admin")
	m := e.module(t)
	f := setup(t, m, 5)
	noShow := func() {
		t.Helper()
		s, err := m.CreateSlot(ctx, f.res.ID, e.clock.Now().Add(time.Hour), e.clock.Now().Add(2*time.Hour), 1)
		if err != nil {
			t.Fatal(err)
		}
		r := paid(t, m, s.ID, "u1")
		e.clock.Set(*r.ExpectedReleaseAt)
		if run := mustScan(t, m); run.Released != 1 {
			t.Fatalf("scan: %+v", run)
		}
	}
	noShow()
	noShow()
	later, err := m.CreateSlot(ctx, f.res.ID, e.clock.Now().Add(48*time.Hour), e.clock.Now().Add(49*time.Hour), 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Book(ctx, f.slot.ID, "u1"); code(err) != "slot_over" {
		t.Fatalf("booking an ended slot: %v", err)
	}
	if _, err := m.Book(ctx, later.ID, "u1"); err != nil {
		t.Fatalf("booking with the policy off: %v", err)
	}
	pol, _ := m.Policy(ctx)
	pol.Enabled, pol.Threshold, pol.WindowDays, pol.RestrictDays = true, 3, 365, 30
	if _, err := m.SetPolicy(ctx, *pol, "repeated no-shows at peak"); err != nil {
		t.Fatal(err)
	}
	noShow()
	if _, err := m.Book(ctx, later.ID, "u1"); code(err) != "booking_restricted" {
		t.Fatalf("booking restricted: %v", err)
	}
	if _, err := m.JoinWaitlist(ctx, later.ID, "u1"); code(err) != "booking_restricted" {
		t.Fatalf("waitlist restricted: %v", err)
	}
	rec, _ := m.NoShows(ctx, "u1")
	if rec.Total != 3 || rec.Restriction == nil || rec.Restriction.NoShows != 3 {
		t.Fatalf("record: %+v", rec)
	}
	if got := auditActions(t, m, "reservation.restrict"); len(got) != 1 || !strings.Contains(got[0], "system:reservation.noshow_policy") {
		t.Fatalf("restriction audits: %v", got)
	}
	if err := m.LiftRestriction(ctx, "u1", "goodwill"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Book(ctx, later.ID, "u1"); err != nil {
		t.Fatalf("booking after the lift: %v", err)
	}
	if err := m.LiftRestriction(ctx, "u1", "again"); code(err) != "not_restricted" {
		t.Fatalf("lifting twice: %v", err)
	}
	if err := m.ResetNoShows(ctx, "u1", "record cleared after review"); err != nil {
		t.Fatal(err)
	}
	rec, _ = m.NoShows(ctx, "u1")
	if rec.InWindow != 0 || rec.Voided != 3 || rec.Total != 3 {
		t.Fatalf("record after reset: %+v", rec)
	}
	for _, a := range []string{"reservation.noshow_policy", "reservation.restriction_lift", "reservation.noshow_reset"} {
		if len(auditActions(t, m, a)) != 1 {
			t.Fatalf("no audit of %s", a)
		}
	}
}

func TestAvailabilityReadAssists(t *testing.T) {
	runBoth(t, testAssist[pgx.Tx], testAssist[*sql.Tx])
}

// Reading a slot's availability releases its due reservations first; the
// periodic scan then finds nothing left.
func testAssist[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	m := e.module(t)
	f := setup(t, m, 2)
	paid(t, m, f.slot.ID, "u1")
	paid(t, m, f.slot.ID, "u2")
	e.clock.Set(t0.Add(15 * time.Minute))
	s, err := m.SlotAvailability(ctx, f.slot.ID)
	if err != nil || s.Available != 2 || s.Held != 0 {
		t.Fatalf("availability: %+v %v", s, err)
	}
	if run := mustScan(t, m); run.Scanned != 0 {
		t.Fatalf("scan after the assist: %+v", run)
	}
	hist, _ := m.History(ctx, 1)
	if last := hist[len(hist)-1]; last.Actor != "system:reservation.assist" {
		t.Fatalf("released by %s", last.Actor)
	}
}

func TestSettings(t *testing.T) {
	s, err := parseSettings(map[string]string{"delivery.x": "ignored"})
	if err != nil || s.zone.String() != "Asia/Shanghai" || s.pageSize != 200 || s.txSize != 20 ||
		s.scanInterval != 30*time.Second || !s.asyncCommit {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	s, err = parseSettings(map[string]string{"reservation.zone": "UTC", "reservation.page_size": "50",
		"reservation.tx_size": "10", "reservation.scan_interval": "5s", "reservation.async_commit": "false"})
	if err != nil || s.zone != time.UTC || s.pageSize != 50 || s.txSize != 10 || s.scanInterval != 5*time.Second || s.asyncCommit {
		t.Fatalf("set: %+v %v", s, err)
	}
	for _, bad := range []map[string]string{
		{"reservation.zone": "Mars/Olympus"},
		{"reservation.page_size": "0"},
		{"reservation.tx_size": "300"},
		{"reservation.scan_interval": "soon"},
		{"reservation.webhook_url": "ftp://x"},
		{"reservation.pagesize": "10"},
	} {
		if _, err := parseSettings(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestConfigureRegistersJobs(t *testing.T) {
	e := newSQLiteEnv(t)
	m := e.module(t)
	cfg := &keel.Config{}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	kinds := strings.Join(cfg.Workers.Kinds(), ",")
	for _, k := range []string{KindScan, KindCompensate, KindRelease, KindNotify, KindRelay} {
		if !strings.Contains(kinds, k) {
			t.Fatalf("%s not registered: %s", k, kinds)
		}
	}
	if len(cfg.PeriodicJobs) != 2 || cfg.PeriodicJobs[0].Name != KindScan || cfg.PeriodicJobs[1].Name != KindCompensate {
		t.Fatalf("periodic jobs: %+v", cfg.PeriodicJobs)
	}
	if _, ok := cfg.Queues[DefaultQueue]; !ok {
		t.Fatal("no reservation queue")
	}
	if _, ok := cfg.Queues[keel.DefaultQueue]; !ok {
		t.Fatal("the default queue was dropped")
	}
	tick := cfg.PeriodicJobs[1].Schedule.Next(t0)
	if tick.Sub(t0) > time.Hour || tick.Minute() != 0 {
		t.Fatalf("compensation tick %v", tick)
	}
}
