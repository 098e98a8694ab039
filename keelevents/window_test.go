package keelevents_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
)

// TestInboxWindow hands a windowed ordered consumer's handler what a bus
// would: several events of each key in order, in transactions of Batch. An
// event that fails holds back the later ones of its key, in its own
// transaction and in the later ones of the call, and nothing of the other
// keys; the retry, in order, applies the rest once; an event past its
// budget goes to manual and lets its key go on; a redelivered event in a
// window is absorbed.
func TestInboxWindow(t *testing.T) { each(t, testInboxWindow[pgx.Tx], testInboxWindow[*sql.Tx]) }

func testInboxWindow[TTx any](t *testing.T, env *tenv[TTx]) {
	effectTable(t, env)
	ev := newEvents(t, env, nil)
	failing := map[string]int{"a2": 2, "c1": 5} // a failure in a batch and again alone
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "win", Topics: []string{"w.e"}, Ordered: true, Window: 64, Batch: 2,
		MaxAttempts: 2,
		HandleBatch: func(ctx context.Context, tx keelsql.Tx[TTx], ds []*keelevents.Delivery) error {
			for _, d := range ds {
				if failing[d.ID] > 0 {
					failing[d.ID]--
					return errors.New("failing on purpose")
				}
				if _, err := tx.Exec(ctx, insertEffect(env.driver), "win", d.ID, d.Key); err != nil {
					return err
				}
			}
			return nil
		}}); err != nil {
		t.Fatal(err)
	}
	start(t, env, ev) // the in-database bus delivers nothing here: it has no window
	if err := ev.Consume(keelevents.Consumer[TTx]{Name: "unordered-window", Topics: []string{"w.e"}, Window: 8,
		Handle: func(context.Context, keelsql.Tx[TTx], *keelevents.Delivery) error { return nil }}); !errors.Is(err, keelevents.ErrInvalid) {
		t.Fatalf("a window without Ordered: %v", err)
	}
	h := keelevents.HandleWindow(ev, "win")
	d := func(id string, partition, attempt int) *keelevents.Delivery {
		p := []byte(`{"id":"` + id + `"}`)
		return &keelevents.Delivery{Message: keelevents.Message{Topic: "w.e", ID: id, Key: id[:1], Type: "w.e", Partition: partition,
			Payload: p, Digest: keelevents.Digest(p), EmittedAt: time.Now().UTC()}, Attempt: attempt}
	}
	ctx := context.Background()
	applied := func() []string {
		var ids []string
		rows, err := env.db.Query(ctx, "SELECT event_id FROM t_effect ORDER BY event_id")
		ids, err = keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
			var id string
			return id, r.Scan(&id)
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	outcome := func(errs []error) string {
		s := ""
		for _, err := range errs {
			if err == nil {
				s += "+"
			} else {
				s += "-"
			}
		}
		return s
	}

	// Transactions of two: [a1 b1] [a2 b2] [a3 b3] [a4]. a2 fails: its
	// batch is retried one by one, b2 commits, and a3, a4 are held back.
	errs := h(ctx, []*keelevents.Delivery{d("a1", 0, 1), d("b1", 1, 1), d("a2", 0, 1), d("b2", 1, 1),
		d("a3", 0, 1), d("b3", 1, 1), d("a4", 0, 1)})
	if got := outcome(errs); got != "++-+-+-" {
		t.Fatalf("first call: %s (%v)", got, errs)
	}
	if got := fmt.Sprint(applied()); got != "[a1 b1 b2 b3]" {
		t.Fatalf("after the first call: %s", got)
	}
	// The retry, in order, with a redelivery of a1 (already applied).
	errs = h(ctx, []*keelevents.Delivery{d("a1", 0, 2), d("a2", 0, 2), d("a3", 0, 1), d("a4", 0, 1)})
	if got := outcome(errs); got != "++++" {
		t.Fatalf("retry: %s (%v)", got, errs)
	}
	if got := fmt.Sprint(applied()); got != "[a1 a2 a3 a4 b1 b2 b3]" {
		t.Fatalf("after the retry: %s", got)
	}
	// c1 fails past its budget (2 attempts): on the second it goes to
	// manual and c2 is applied behind it.
	if got := outcome(h(ctx, []*keelevents.Delivery{d("c1", 2, 1), d("c2", 2, 1)})); got != "--" {
		t.Fatalf("c1's first attempt: %s", got)
	}
	if got := outcome(h(ctx, []*keelevents.Delivery{d("c1", 2, 2), d("c2", 2, 1)})); got != "++" {
		t.Fatalf("c1's last attempt: %s", got)
	}
	if got := fmt.Sprint(applied()); got != "[a1 a2 a3 a4 b1 b2 b3 c2]" {
		t.Fatalf("at the end: %s", got)
	}
	m, err := ev.ListManual(ctx, keelevents.ListParams{Consumer: "win"})
	if err != nil || len(m) != 1 || m[0].Message.ID != "c1" {
		t.Fatalf("manual: %+v %v", m, err)
	}
}
