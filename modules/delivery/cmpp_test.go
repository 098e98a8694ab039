package delivery

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestCMPPPush pushes status reports and MO messages to gocmpp customers
// over CMPP 2.0 and 3.0: the 2.0 report is 60 bytes, the 3.0 report 71
// (60 with the compatibility switch), the report carries the original
// Msg_Id, and the DELIVER_RESP decides: result 0 delivered, non-zero
// rejected, a wrong echoed Msg_Id rejected as invalid, no answer
// unconfirmed at the ACK timeout, a closed connection unconfirmed at once.
func TestCMPPPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	i := e.start(testSettings("ack_timeout", "1s", "ack_inline", "200ms"))
	ent := e.enterprise(i, "Acme")
	a20 := e.app(i, ent, "two", "c20", ProtoCMPP20, "")
	a30 := e.app(i, ent, "three", "c30", ProtoCMPP30, "")
	compat := e.app(i, ent, "compat", "c30c", ProtoCMPP30, "")
	if _, err := i.m.UpdateApplication(context.Background(), compat.ID, AppChange{ReportCompat: ptrTo(true)}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	policy := map[string]ackAction{} // by phone
	pol := func(d *delivered) ackAction {
		mu.Lock()
		defer mu.Unlock()
		return policy[d.Dest]
	}
	c20 := customer(t, i, a20, pol, nil)
	c30 := customer(t, i, a30, pol, nil)
	cc := customer(t, i, compat, pol, nil)
	ctx := context.Background()
	push := func(a *Application, r *Record) {
		t.Helper()
		if _, err := i.c.Insert(ctx, PushArgs{DeliveryID: r.ID, AppID: a.ID, RecordKind: r.Kind}, pushOpts(a.ID)); err != nil {
			t.Fatal(err)
		}
	}
	settled := func(id int64) *Record {
		t.Helper()
		var r *Record
		waitFor(t, 10*time.Second, "record "+strconv.FormatInt(id, 10)+" to settle", func() bool {
			r = e.record(i, id)
			return r.Status != StatusPending && r.Status != StatusAwaitingACK
		})
		return r
	}

	r20 := e.seed(i, a20, StatusPending, time.Now(), "13800000020")
	r30 := e.seed(i, a30, StatusPending, time.Now(), "13800000030")
	rc := e.seed(i, compat, StatusPending, time.Now(), "13800000031")
	mo := e.seedMO(i, a30, StatusPending, time.Now(), "13900000001")
	for _, p := range []struct {
		a *Application
		r *Record
	}{{a20, r20}, {a30, r30}, {compat, rc}, {a30, mo}} {
		push(p.a, p.r)
	}
	for _, r := range []*Record{r20, r30, rc, mo} {
		if got := settled(r.ID); got.Status != StatusDelivered || got.Seq == nil || got.DeliverMsgID == "" {
			t.Fatalf("record %d: %+v", r.ID, got)
		}
	}
	checkReport := func(c *customerSim, r *Record, layout int) {
		t.Helper()
		got := c.Received()
		for _, d := range got {
			if d.IsReport && strconv.FormatUint(d.Inner, 10) == r.MsgID {
				if d.Layout != layout || d.Stat != "DELIVRD" || d.Dest != r.Phone {
					t.Fatalf("report of %d: %+v, want layout %d", r.ID, d, layout)
				}
				return
			}
		}
		t.Fatalf("customer never got the report of record %d: %+v", r.ID, got)
	}
	checkReport(c20, r20, 60)
	checkReport(c30, r30, 71)
	checkReport(cc, rc, 60)
	var gotMO bool
	for _, d := range c30.Received() {
		if !d.IsReport && strconv.FormatUint(d.Outer, 10) == mo.MsgID && d.Content == "TD" && d.Dest == mo.Phone {
			gotMO = true
		}
	}
	if !gotMO {
		for _, d := range c30.Received() {
			t.Logf("%+v", *d)
		}
		t.Fatalf("MO %s not received under its own Msg_Id", mo.MsgID)
	}

	mu.Lock()
	policy["13800000021"] = ackAction{Result: 9}
	policy["13800000022"] = ackAction{Echo: 12345}
	policy["13800000023"] = ackAction{Silent: true}
	policy["13800000024"] = ackAction{Delay: 400 * time.Millisecond}
	mu.Unlock()
	rej := e.seed(i, a20, StatusPending, time.Now(), "13800000021")
	bad := e.seed(i, a30, StatusPending, time.Now(), "13800000022")
	silent := e.seed(i, a20, StatusPending, time.Now(), "13800000023")
	slow := e.seed(i, a30, StatusPending, time.Now(), "13800000024")
	push(a20, rej)
	push(a30, bad)
	push(a20, silent)
	push(a30, slow)
	if r := settled(rej.ID); r.Status != StatusRejected || r.LastErrorClass != ClassAckRejected || *r.AckResult != 9 {
		t.Fatalf("rejected: %+v", r)
	}
	if r := settled(bad.ID); r.Status != StatusRejected || r.LastErrorClass != ClassInvalidMsgID {
		t.Fatalf("wrong echo: %+v", r)
	}
	if r := settled(slow.ID); r.Status != StatusDelivered {
		t.Fatalf("ACK after the inline wait (the job parked, the ACK woke it): %+v", r)
	}
	if r := settled(silent.ID); r.Status != StatusUnconfirmed || r.LastErrorClass != ClassAckTimeout {
		t.Fatalf("silent: %+v", r)
	}
	waitFor(t, 5*time.Second, "push jobs to finish", func() bool { return jobsFinal(t, i) })

	// A connection that closes with a DELIVER outstanding.
	mu.Lock()
	policy["13800000025"] = ackAction{Silent: true}
	mu.Unlock()
	gone := e.seed(i, a30, StatusPending, time.Now(), "13800000025")
	push(a30, gone)
	waitFor(t, 5*time.Second, "the DELIVER to reach the customer", func() bool {
		for _, d := range c30.Received() {
			if d.Dest == "13800000025" {
				return true
			}
		}
		return false
	})
	if err := c30.Close(); err != nil {
		t.Fatal(err)
	}
	if r := settled(gone.ID); r.Status != StatusUnconfirmed || r.LastErrorClass != ClassConnClosed {
		t.Fatalf("closed connection: %+v", r)
	}
}

func ptrTo[T any](v T) *T { return &v }

// jobsFinal reports whether no delivery job is live.
func jobsFinal[TTx any](t *testing.T, i *inst[TTx]) bool {
	t.Helper()
	st, err := i.c.QueueStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st {
		if q.Queue != QueueName {
			continue
		}
		for s, n := range q.Counts {
			if !s.Final() && n > 0 {
				return false
			}
		}
	}
	return true
}
