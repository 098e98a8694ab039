package delivery

import (
	"context"
	"testing"
	"time"
)

// TestHTTPPush: an ingested report becomes a record and a push job; the
// HTTP channel posts it signed, and the per-item ACK in the body decides:
// 0 delivered, non-zero rejected, a missing ACK rejected as invalid, a
// non-2xx answer failed (http_status), a timeout unconfirmed
// (http_timeout). Each concluded record keeps its history.
func TestHTTPPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var hc *httpCustomer
	hc = newHTTPCustomer(t, "secret-h1", ackAll)
	i := e.start(testSettings("http_timeout", "500ms"))
	ent := e.enterprise(i, "Acme")
	a := e.app(i, ent, "acme-http", "h1", ProtoHTTP, hc.srv.URL)
	ctx := context.Background()

	push := func(phone string) int64 {
		t.Helper()
		r := e.seed(i, a, StatusPending, time.Now(), phone)
		if _, err := i.c.Insert(ctx, PushArgs{DeliveryID: r.ID, AppID: a.ID, RecordKind: KindReport},
			pushOpts(a.ID)); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	settled := func(id int64) *Record {
		t.Helper()
		var r *Record
		waitFor(t, 10*time.Second, "record to settle", func() bool {
			r = e.record(i, id)
			return r.Status != StatusPending && r.Status != StatusAwaitingACK
		})
		return r
	}

	ok := settled(push("13800000001"))
	if ok.Status != StatusDelivered || ok.AckedAt == nil || ok.Attempts != 1 || ok.Sender != "push" {
		t.Fatalf("acknowledged push: %+v", ok)
	}
	if got := hc.received(); len(got) != 1 || got[0].Report == nil || got[0].Report.Stat != "DELIVRD" || got[0].MsgID != ok.MsgID {
		t.Fatalf("customer received %+v", got)
	}

	hc.setAnswer(func(items []PushItem) (int, any) {
		nine := int64(9)
		zero := int64(0)
		return 200, PushAck{Code: &zero, Acks: []PushItemAck{{ID: items[0].ID, Code: &nine}}}
	})
	if r := settled(push("13800000002")); r.Status != StatusRejected || r.LastErrorClass != ClassAckRejected || r.AckResult == nil || *r.AckResult != 9 {
		t.Fatalf("rejected push: %+v", r)
	}
	hc.setAnswer(func(items []PushItem) (int, any) { zero := int64(0); return 200, PushAck{Code: &zero} })
	if r := settled(push("13800000003")); r.Status != StatusRejected || r.LastErrorClass != ClassInvalidAck {
		t.Fatalf("push without an item ACK: %+v", r)
	}
	hc.setAnswer(func(items []PushItem) (int, any) { return 503, map[string]string{"error": "busy"} })
	if r := settled(push("13800000004")); r.Status != StatusFailed || r.LastErrorClass != ClassHTTPStatus {
		t.Fatalf("non-2xx push: %+v", r)
	}
	// A customer that answers only after the pusher gave up on it.
	late := make(chan struct{})
	hc.setAnswer(func(items []PushItem) (int, any) { <-late; return ackAll(items) })
	r := settled(push("13800000005"))
	close(late)
	if r.Status != StatusUnconfirmed || r.LastErrorClass != ClassHTTPTimeout {
		t.Fatalf("timed-out push: %+v", r)
	}
	if hc.badSig.Load() != 0 {
		t.Fatalf("%d pushes had a bad signature", hc.badSig.Load())
	}
}

func pushOpts(appID int64) *keelInsertOpts {
	return &keelInsertOpts{Queue: QueueName, FlowKey: appKey(appID)}
}
