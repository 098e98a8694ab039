package reservation

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestNoticesArriveOnceThroughTheEvents(t *testing.T) {
	runBoth(t, testNoticesOnce[pgx.Tx], testNoticesOnce[*sql.Tx])
}

// lostCommit is a channel whose first send of each notice reaches the
// counterpart and then fails as if the notifier died before its inbox
// transaction committed: the event comes back and is sent again, with the
// same key.
type lostCommit struct {
	Channel
	mu   sync.Mutex
	seen map[string]bool
}

func (c *lostCommit) Send(ctx context.Context, msg Message) error {
	if err := c.Channel.Send(ctx, msg); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen[msg.Key] {
		c.seen[msg.Key] = true
		return errors.New("notifier gone before its commit")
	}
	return nil
}

// From the receiver's side: a reservation's reminder (a scheduled job that
// emits its event when due) and its release notice (an event emitted by the
// release) each reach the webhook, and the receiver, which drops a repeat
// by Idempotency-Key as Channel asks, ends with exactly one of each, even
// though the first send of each was followed by a lost commit and the
// events were then delivered once more after their commit (as after a
// notifier killed between its commit and its ack), absorbed by the
// notifier's inbox without a send.
func testNoticesOnce[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	h, webhook := newHook(t, 0)
	ch := &lostCommit{Channel: webhook, seen: map[string]bool{}}
	m := e.working(t, WithChannel(ch), WithNotifyBackoff(10*time.Millisecond))
	eventually(t, "the start-up scan", func() bool {
		runs, err := m.Runs(ctx, "scan", 0, 1)
		return err == nil && len(runs) > 0
	})
	// One reservation released at its start (grace 0) two seconds from
	// now, with no reminder; another whose reminder is due in an hour, its
	// scheduled job made to run now.
	soon := nowFixture(t, m, 0, 0, time.Now().Add(2*time.Second))
	s := defaultSettings()
	if _, err := m.CreateCategory(ctx, "later", s, "test fixture"); err != nil {
		t.Fatal(err)
	}
	res, err := m.CreateResource(ctx, "later", "B-01", "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(time.Hour)
	laterSlot, err := m.CreateSlot(ctx, res.ID, start, start.Add(time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	released := paid(t, m, soon.slot.ID, "u1")
	reminded := paid(t, m, laterSlot.ID, "u2")
	runNow(t, m, reminderOf(t, m, reminded.ID, reminded.Version))
	eventually(t, "the precise release", func() bool { return state(t, m, released.ID).State == StateReleased })
	relVersion := state(t, m, released.ID).Version
	eventually(t, "both notices sent", func() bool {
		return noteState(t, m, released.ID, kindRelease, relVersion) == "sent" &&
			noteState(t, m, reminded.ID, kindReminder, reminded.Version) == "sent"
	})
	byKey := func() map[string]int {
		got := map[string]int{}
		for _, msg := range h.messages() {
			got[fmt.Sprintf("%s/%d", msg.Kind, msg.ReservationID)]++
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		keys := map[string]bool{}
		for _, k := range h.keys {
			keys[k] = true
		}
		got["distinct keys"] = len(keys)
		return got
	}
	got := byKey()
	// Two sends per notice reached the receiver (the one whose commit was
	// lost and the redelivery), under one key each.
	if got[fmt.Sprintf("release/%d", released.ID)] != 2 || got[fmt.Sprintf("reminder/%d", reminded.ID)] != 2 ||
		got["distinct keys"] != 2 {
		t.Fatalf("receiver got %v", got)
	}
	for _, n := range mustNotes(t, m, released.ID, reminded.ID) {
		if (n.Kind == kindRelease || n.Kind == kindReminder) && n.State == "sent" && n.Attempts != 2 {
			t.Fatalf("notice %+v: want 2 attempts", n)
		}
	}
	// Deliver both events once more after their commit: the inbox absorbs
	// them and nothing more reaches the receiver.
	before := duplicates(t, m)
	redeliver(t, e)
	eventually(t, "the redeliveries absorbed", func() bool { return duplicates(t, m) >= before+2 })
	if now := byKey(); now["distinct keys"] != 2 || len(h.messages()) != 4 {
		t.Fatalf("after the redeliveries the receiver got %v (%d messages)", now, len(h.messages()))
	}
	noDrift(t, m)
}

func TestNoticeThatFailsIsRetriedAlone(t *testing.T) {
	runBoth(t, testNoticeFailsAlone[pgx.Tx], testNoticeFailsAlone[*sql.Tx])
}

// From the receiver's side: forty reservations released at one release
// point hand their notices to the notifier together, which sends them in
// shared transactions. The receiver refuses one user's notice twice: that
// notice is retried alone until it goes through, and every other notice,
// including the ones that shared its transaction, arrives exactly once.
func testNoticeFailsAlone[TTx any](t *testing.T, e *env[TTx]) {
	h, webhook := newHook(t, 0)
	h.failUser = map[string]int{"u7": 2}
	noticeFailsAlone(t, e, h, webhook, 2)
}

func TestNoticeWhoseChannelPanicsIsRetriedAlone(t *testing.T) {
	runBoth(t, testNoticePanicsAlone[pgx.Tx], testNoticePanicsAlone[*sql.Tx])
}

// panicky is a channel that panics on its first two sends to u7 (a bug in
// a user's channel): those count as failed sends, and the process lives.
type panicky struct {
	Channel
	left atomic.Int32
}

func (c *panicky) Send(ctx context.Context, msg Message) error {
	if msg.UserID == "u7" && c.left.Add(-1) >= 0 {
		panic("template missing")
	}
	return c.Channel.Send(ctx, msg)
}

// The same as testNoticeFailsAlone with a channel that panics instead of a
// receiver that refuses: the receiver counts the same.
func testNoticePanicsAlone[TTx any](t *testing.T, e *env[TTx]) {
	h, webhook := newHook(t, 0)
	ch := &panicky{Channel: webhook}
	ch.left.Store(2)
	noticeFailsAlone(t, e, h, ch, 0)
	if ch.left.Load() >= 0 {
		t.Fatal("the channel never panicked")
	}
}

func noticeFailsAlone[TTx any](t *testing.T, e *env[TTx], h *hook, ch Channel, wantRefused int) {
	t.Helper()
	ctx := context.Background()
	m := e.working(t, WithChannel(ch), WithNotifyBackoff(10*time.Millisecond))
	eventually(t, "the start-up scan", func() bool {
		runs, err := m.Runs(ctx, "scan", 0, 1)
		return err == nil && len(runs) > 0
	})
	const n = 40
	s := defaultSettings()
	s.GraceMinutes, s.ReminderMinutes = 0, 0
	if _, err := m.CreateCategory(ctx, "hall", s, "test fixture"); err != nil {
		t.Fatal(err)
	}
	res, err := m.CreateResource(ctx, "hall", "H-01", "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(2 * time.Second)
	slot, err := m.CreateSlot(ctx, res.ID, start, start.Add(time.Hour), n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		paid(t, m, slot.ID, fmt.Sprintf("u%d", i))
	}
	eventually(t, "every notice at the receiver", func() bool { return len(h.messages()) >= n })
	byUser := map[string]int{}
	for _, msg := range h.messages() {
		if msg.Kind != kindRelease {
			t.Fatalf("unexpected %s notice for %s", msg.Kind, msg.UserID)
		}
		byUser[msg.UserID]++
	}
	var wrong []string
	for i := range n {
		if u := fmt.Sprintf("u%d", i); byUser[u] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s×%d", u, byUser[u]))
		}
	}
	h.mu.Lock()
	refused := h.refused
	h.mu.Unlock()
	if len(wrong) > 0 || len(byUser) != n || refused != wantRefused {
		t.Fatalf("the receiver took %d notices from %d users, refused %d (want %d); users not received exactly once: %v",
			len(h.messages()), len(byUser), refused, wantRefused, wrong)
	}
}

func mustNotes[TTx any](t *testing.T, m *Module[TTx], ids ...int64) []Notification {
	t.Helper()
	var all []Notification
	for _, id := range ids {
		list, err := m.Notifications(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, list...)
	}
	return all
}

// duplicates is the notifier's count of redeliveries absorbed.
func duplicates[TTx any](t *testing.T, m *Module[TTx]) int64 {
	t.Helper()
	stats, err := m.h.Events.ConsumerStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Name == NotifierConsumer {
			return s.Duplicates
		}
	}
	return 0
}

// redeliver hands the notifier the notification events once more, as the
// bus does when a consumer died after its commit and before its ack: a
// delivery row per event, due now.
func redeliver[TTx any](t *testing.T, e *env[TTx]) {
	t.Helper()
	// A notice is "sent" once its send commits; the consumer's
	// acknowledgement (deleting its delivery row) commits after that. Until
	// it has, inserting the same delivery again collides with the row.
	pending := "SELECT count(*) FROM keel_events_bus_delivery WHERE consumer = '" + NotifierConsumer + "'"
	eventually(t, "the notifier's deliveries acknowledged", func() bool {
		var n int
		if err := e.db.QueryRow(context.Background(), pending).Scan(&n); err != nil {
			t.Fatalf("%s: %v", pending, err)
		}
		return n == 0
	})
	due := "0"
	if e.db.Dialect() == "postgres" {
		due = "now() - interval '1 hour'"
	}
	q := "INSERT INTO keel_events_bus_delivery (consumer, seq, part, attempt, available_at) " +
		"SELECT '" + NotifierConsumer + "', seq, part, 0, " + due + " FROM keel_events_bus_message WHERE topic = '" +
		NotificationTopic + "'"
	if _, err := e.db.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
