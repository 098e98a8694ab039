package payment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
)

// TestCallbackGroupCommit: forty payments paid at once at the simulator,
// whose callbacks reach the ingress concurrently (the first one sent three
// times), are committed in shared transactions — on SQLite as on
// PostgreSQL: fewer transactions than callbacks, none failed, every
// payment paid with one success event and its evidence, the duplicates
// answered with success and no second effect. On SQLite the batch itself
// answers every callback, the duplicates too.
func TestCallbackGroupCommit(t *testing.T) { each(t, testGroupCommit, testGroupCommit) }

func testGroupCommit[TTx any](t *testing.T, e *tenv[TTx]) {
	e.start(t, startOpts{noSweep: true, noRelay: true, settings: map[string]string{"payment.callback_lanes": "1"}})
	const n = 40
	wx := channel.KindWeChat
	nos := make([]string, n)
	for i := range nos {
		nos[i] = fmt.Sprintf("GRPC%06d", i)
		e.pay(t, wx, nos[i], 12800+int64(i), "CNY")
	}
	e.sim.Duplicate(3) // the next callback, the first payment's, is sent three times
	if err := e.sim.Pay(wx, nos[0]); err != nil {
		t.Fatal(err)
	}
	// Hold the payments (PostgreSQL: their rows; SQLite: its one writer)
	// until callbacks queue behind the first batch, so that batches are
	// shared because callbacks met, not because the machine was slow
	// enough for them to meet: on a fast one each commit can end before
	// the next callback arrives.
	held, release, releasedAt := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		releasedAt <- e.DB.InTx(context.Background(), func(tx keelsql.Tx[TTx]) error {
			q := "SELECT payment_no FROM pay_payment WHERE payment_no LIKE 'GRPC%' FOR UPDATE"
			if e.DB.Dialect() == "sqlite" {
				q = "UPDATE pay_payment SET payment_no = payment_no WHERE 1 = 0" // takes the write lock
			}
			rows, err := tx.Query(context.Background(), q)
			if err != nil {
				return err
			}
			rows.Close()
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	var wg sync.WaitGroup
	for _, no := range nos[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.sim.Pay(wx, no); err != nil {
				t.Error(err)
			}
		}()
	}
	moduletest.WaitFor(t, 30*time.Second, "callbacks queued behind the held batch", func() bool { return e.m.GroupStats().Waiting >= 10 })
	close(release)
	if err := <-releasedAt; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	moduletest.WaitFor(t, 30*time.Second, "every callback acknowledged", func() bool {
		for i, no := range nos {
			want := 1
			if i == 0 {
				want = 3
			}
			if e.sim.Acks(no) < want {
				return false
			}
		}
		return true
	})
	for _, no := range nos {
		if s := e.state(t, no); s != PayPaid {
			t.Fatalf("%s is %s", no, s)
		}
		if c := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE event_id = $1", "payment:"+no+":succeeded"); c != 1 {
			t.Fatalf("%s: %d success events", no, c)
		}
		if c := e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1 AND outcome = 'applied'", no); c != 1 {
			t.Fatalf("%s: %d applied callbacks", no, c)
		}
	}
	if d := e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1 AND outcome = 'duplicate'", nos[0]); d != 2 {
		t.Fatalf("%d duplicate callbacks recorded for %s, want 2", d, nos[0])
	}
	gs := e.m.GroupStats()
	if gs.Failed != 0 || gs.Callbacks < n || gs.Batches >= gs.Callbacks || gs.Largest < 2 || gs.Applied != n {
		t.Fatalf("group commit: %+v; want shared transactions, none failed", gs)
	}
	if e.DB.Dialect() == "sqlite" && gs.Alone != 0 {
		t.Fatalf("on SQLite the batch answers every callback, %d went alone: %+v", gs.Alone, gs)
	}
	t.Logf("%s: %+v", e.DB.Dialect(), gs)
}
