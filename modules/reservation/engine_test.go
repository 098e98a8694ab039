package reservation

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

// working builds a module on the real clock with a started engine client
// running its workers (scan and compensation ticks set far apart so that
// tests drive them).
func (e *env[TTx]) working(t *testing.T, opts ...Option) *Module[TTx] {
	t.Helper()
	opts = append([]Option{WithRetryBackoff(time.Millisecond)}, opts...)
	ev := testEvents(t, e.db)
	m, err := New(&module.Host[TTx]{DB: e.db, Logger: quiet(), Events: ev, Settings: map[string]string{
		"reservation.scan_interval": "1h", "reservation.compensation_interval": "1h"}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{Logger: quiet(), FetchPollInterval: 20 * time.Millisecond, PromoteInterval: 10 * time.Millisecond,
		LeaderTTL: 600 * time.Millisecond, CompleterFlushInterval: time.Millisecond,
		RetryPolicy: &keel.JitterRetryPolicy{Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}}
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	client, err := keel.NewClient(e.driver, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Stop(stop)
		_ = client.StopAndCancel(stop)
	})
	if err := m.Start(ctx, client); err != nil {
		t.Fatal(err)
	}
	startEvents(t, ev, client)
	return m
}

// eventually polls cond until it holds (a condition of the system, never a
// fixed wait).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	moduletest.WaitFor(t, 20*time.Second, what, cond)
}

// hook is a webhook receiver: the real protocol over loopback. It fails
// the first failFirst deliveries with 503, and those of a user in
// failUser (set before the first delivery) that user's number of times.
type hook struct {
	mu        sync.Mutex
	failFirst int
	failUser  map[string]int
	calls     int
	refused   int
	got       []Message
	keys      []string
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls <= h.failFirst {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var msg Message
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if h.failUser[msg.UserID] > 0 {
		h.failUser[msg.UserID]--
		h.refused++
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	h.got = append(h.got, msg)
	h.keys = append(h.keys, r.Header.Get("Idempotency-Key"))
	w.WriteHeader(http.StatusNoContent)
}

func (h *hook) messages() []Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Message(nil), h.got...)
}

func newHook(t *testing.T, failFirst int) (*hook, Channel) {
	h := &hook{failFirst: failFirst}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, NewWebhookChannel(srv.URL)
}

// nowFixture is a category with the given grace and reminder minutes and
// a slot of three places starting at start, on the real clock.
func nowFixture[TTx any](t *testing.T, m *Module[TTx], grace, reminder int, start time.Time) *fixture {
	t.Helper()
	ctx := context.Background()
	s := defaultSettings()
	s.GraceMinutes, s.ReminderMinutes = grace, reminder
	cat, err := m.CreateCategory(ctx, "ws", s, "test fixture")
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.CreateResource(ctx, "ws", "A-01", "")
	if err != nil {
		t.Fatal(err)
	}
	slot, err := m.CreateSlot(ctx, res.ID, start, start.Add(time.Hour), 3)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{cat: cat, res: res, slot: slot}
}

func TestPreciseReleaseAndNoticeDelivery(t *testing.T) {
	runBoth(t, testPrecise[pgx.Tx], testPrecise[*sql.Tx])
}

// The scheduled job releases at the release point without any scan; the
// release notice reaches the webhook (after a failed attempt retried by the
// engine) with its idempotency key, and the failure never touched the
// release.
func testPrecise[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	h, ch := newHook(t, 1)
	m := e.working(t, WithChannel(ch))
	// The hourly scan fires once at start for the tick it finds due; let it
	// finish before anything is due, so only the precise job can release.
	eventually(t, "the start-up scan", func() bool {
		runs, err := m.Runs(ctx, "scan", 0, 1)
		return err == nil && len(runs) > 0
	})
	f := nowFixture(t, m, 0, 0, time.Now().Add(time.Second))
	r := paid(t, m, f.slot.ID, "u1")
	eventually(t, "the precise release", func() bool { return state(t, m, r.ID).State == StateReleased })
	got := state(t, m, r.ID)
	if got.ReleasedAt.Before(*got.ExpectedReleaseAt) {
		t.Fatalf("released at %s, before its release point %s", got.ReleasedAt, got.ExpectedReleaseAt)
	}
	hist, _ := m.History(ctx, r.ID)
	if last := hist[len(hist)-1]; last.Actor != "system:reservation.precise" {
		t.Fatalf("released by %s", last.Actor)
	}
	eventually(t, "the release notice to be sent", func() bool {
		return noteState(t, m, r.ID, kindRelease, got.Version) == "sent"
	})
	if len(h.messages()) != 1 {
		t.Fatalf("webhook got %d messages", len(h.messages()))
	}
	msg := h.messages()[0]
	if msg.Kind != kindRelease || msg.ReservationID != r.ID || h.keys[0] != msg.Key || msg.TextZH == "" {
		t.Fatalf("notice: %+v key %s", msg, h.keys[0])
	}
	notes, _ := m.Notifications(ctx, r.ID)
	for _, n := range notes {
		if n.Kind == kindRelease && (n.State != "sent" || n.Attempts != 2) {
			t.Fatalf("release notice row: %+v", n)
		}
	}
	wantState(t, m, r.ID, StateReleased)
	noDrift(t, m)
}

func TestReminderSkippedAfterCheckInAndMovedWithTheReservation(t *testing.T) {
	runBoth(t, testReminder[pgx.Tx], testReminder[*sql.Tx])
}

// A reminder is due at the release point minus the lead time. Checked in
// before it, it is skipped; a moved reservation's reminder and precise job
// are replaced by ones at the new version and release point; an untouched
// reservation's reminder is sent. The reminders are due in an hour: the
// test makes their jobs run now.
func testReminder[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	h, ch := newHook(t, 0)
	m := e.working(t, WithChannel(ch))
	start := time.Now().Add(time.Hour)
	f := nowFixture(t, m, 15, 15, start) // release at start+15m, reminder at start
	checkedIn := paid(t, m, f.slot.ID, "u1")
	moved := paid(t, m, f.slot.ID, "u2")
	untouched := paid(t, m, f.slot.ID, "u3")
	if _, err := m.CheckIn(ctx, checkedIn.ID, 0, ""); err != nil {
		t.Fatal(err)
	}
	later, err := m.CreateSlot(ctx, f.res.ID, start.Add(time.Hour), start.Add(2*time.Hour), 2)
	if err != nil {
		t.Fatal(err)
	}
	after, err := m.Move(ctx, moved.ID, moved.Version, later.ID, "asked for a later slot")
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	if !after.ExpectedReleaseAt.Equal(later.StartsAt.Add(15*time.Minute)) || held(t, m, f.slot.ID) != 2 || held(t, m, later.ID) != 1 {
		t.Fatalf("moved: %+v", after)
	}
	for _, r := range []*Reservation{checkedIn, moved, untouched} {
		runNow(t, m, reminderOf(t, m, r.ID, r.Version))
	}
	eventually(t, "the first reminders to be decided", func() bool {
		return noteState(t, m, checkedIn.ID, kindReminder, checkedIn.Version) == "skipped" &&
			noteState(t, m, moved.ID, kindReminder, moved.Version) == "skipped" &&
			noteState(t, m, untouched.ID, kindReminder, untouched.Version) == "sent"
	})
	if got := h.messages(); len(got) != 1 || got[0].ReservationID != untouched.ID || got[0].Kind != kindReminder {
		t.Fatalf("reminders sent: %+v", got)
	}
	if s := noteState(t, m, moved.ID, kindReminder, after.Version); s != "pending" {
		t.Fatalf("the moved reservation's new reminder is %q", s)
	}
	keys := releaseJobKeys(t, m, moved.ID)
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("release jobs of the moved reservation: %v", keys)
	}
	noDrift(t, m)
}

// reminderOf is the id of the scheduled job that emits a reservation's
// reminder at version when it is due.
func reminderOf[TTx any](t *testing.T, m *Module[TTx], id, version int64) int64 {
	t.Helper()
	notes, err := m.Notifications(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.engine()
	jobs, err := c.JobList(context.Background(), &keel.JobListParams{Kinds: []string{KindNotify}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if n.Kind != kindReminder || n.Version != version {
			continue
		}
		for _, j := range jobs {
			if j.IdempotencyKey == "notify:"+strconv.FormatInt(n.ID, 10) {
				return j.ID
			}
		}
	}
	t.Fatalf("no reminder job for reservation %d at version %d", id, version)
	return 0
}

// runNow makes a scheduled job available at once.
func runNow[TTx any](t *testing.T, m *Module[TTx], job int64) {
	t.Helper()
	c, _ := m.engine()
	if _, err := c.JobRetry(context.Background(), job, "test: deliver now"); err != nil {
		t.Fatalf("running job %d now: %v", job, err)
	}
}

// noteState is the delivery state of a reservation's notification of kind
// at version ("" if none).
func noteState[TTx any](t *testing.T, m *Module[TTx], id int64, kind string, version int64) string {
	notes, err := m.Notifications(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if n.Kind == kind && n.Version == version {
			return n.State
		}
	}
	return ""
}

// releaseJobKeys lists the idempotency keys of a reservation's precise jobs.
func releaseJobKeys[TTx any](t *testing.T, m *Module[TTx], id int64) []string {
	c, _ := m.engine()
	jobs, err := c.JobList(context.Background(), &keel.JobListParams{Kinds: []string{KindRelease}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, j := range jobs {
		var a ReleaseArgs
		if err := json.Unmarshal(j.Args, &a); err == nil && a.ReservationID == id {
			keys = append(keys, j.IdempotencyKey)
		}
	}
	return keys
}

func TestScanNoticesGoThroughTheEvents(t *testing.T) {
	runBoth(t, testScanEvents[pgx.Tx], testScanEvents[*sql.Tx])
}

type recordingPublisher struct {
	mu     sync.Mutex
	events []Event
}

func (p *recordingPublisher) Publish(ctx context.Context, events []Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, events...)
	return nil
}

// A scan writes its notices and availability events to the events outbox
// in its transactions: no relay job and no delivery job of the module's
// own; the notices reach the webhook through the notifier consumer, once
// each, and the events reach the publisher, in order for the slot.
func testScanEvents[TTx any](t *testing.T, e *env[TTx]) {
	pub := &recordingPublisher{}
	h, ch := newHook(t, 0)
	m := e.module(t, WithPublisher(pub), WithChannel(ch))
	f := setup(t, m, 3)
	var ids []int64
	for _, u := range []string{"u1", "u2", "u3"} {
		ids = append(ids, paid(t, m, f.slot.ID, u).ID)
	}
	e.clock.Set(t0.Add(15 * time.Minute))
	mustScan(t, m)
	if n := countJobs(t, m, KindRelay) + countJobs(t, m, KindNotify); n != 0 {
		t.Fatalf("the scan queued %d relay or delivery jobs", n)
	}
	eventually(t, "the three release notices sent", func() bool {
		for _, id := range ids {
			if noteState(t, m, id, kindRelease, state(t, m, id).Version) != "sent" {
				return false
			}
		}
		return true
	})
	releases := 0
	for _, msg := range h.messages() {
		if msg.Kind == kindRelease {
			releases++
		}
	}
	if releases != 3 { // (a reminder due at once may have been sent before the scan)
		t.Fatalf("webhook got %d release notices, want 3", releases)
	}
	eventually(t, "the availability event after the releases", func() bool {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		if len(pub.events) == 0 {
			return false
		}
		last := pub.events[len(pub.events)-1]
		return len(last.Slots) == 1 && last.Slots[0].SlotID == f.slot.ID && last.Slots[0].Available == 3 &&
			strings.HasPrefix(last.ID, "rsv-availability:")
	})
}

func countJobs[TTx any](t *testing.T, m *Module[TTx], kind string) int {
	c, _ := m.engine()
	jobs, err := c.JobList(context.Background(), &keel.JobListParams{Kinds: []string{kind}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}
