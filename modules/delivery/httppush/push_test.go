package httppush

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type item struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// TestPusher pushes to a customer's endpoint as the customer sees it: a
// signed JSON array, and a verdict per item from its answer, from a
// non-2xx status, from an unreachable URL and from a timeout.
func TestPusher(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	var mu sync.Mutex
	var answer func(w http.ResponseWriter, items []item)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(HeaderAccount) != "acct" || Sign(secret, r.Header.Get(HeaderTimestamp), body) != r.Header.Get(HeaderSignature) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var items []item
		if err := json.Unmarshal(body, &items); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		a := answer
		mu.Unlock()
		a(w, items)
	}))
	t.Cleanup(srv.Close)
	setAnswer := func(a func(http.ResponseWriter, []item)) { mu.Lock(); answer = a; mu.Unlock() }

	verdicts := make(chan Verdict, 16)
	p := New(500*time.Millisecond, 10, func(id string, v Verdict) {
		if v.Status == Delivered && id != "1" {
			t.Errorf("item %s delivered", id)
		}
		verdicts <- v
	})
	t.Cleanup(p.Stop)
	target := Target{ID: 1, URL: srv.URL, Account: "acct", Secret: secret}
	next := func() Verdict {
		t.Helper()
		select {
		case v := <-verdicts:
			return v
		case <-time.After(10 * time.Second):
			t.Fatal("no verdict")
			return Verdict{}
		}
	}

	zero, nine := int64(0), int64(9)
	setAnswer(func(w http.ResponseWriter, items []item) {
		acks := []ItemAck{}
		for _, it := range items {
			code := &nine
			if it.ID == "1" {
				code = &zero
			}
			acks = append(acks, ItemAck{ID: it.ID, Code: code})
		}
		_ = json.NewEncoder(w).Encode(Ack{Code: &zero, Acks: acks})
	})
	p.Enqueue(target, "1", "1", item{ID: "1", Text: "a"})
	if v := next(); v.Status != Delivered || v.Result == nil || *v.Result != 0 {
		t.Fatalf("acknowledged item: %+v", v)
	}
	p.Enqueue(target, "2", "2", item{ID: "2", Text: "b"})
	if v := next(); v.Status != Rejected || v.Class != ClassRejected || v.Result == nil || *v.Result != 9 {
		t.Fatalf("rejected item: %+v", v)
	}

	setAnswer(func(w http.ResponseWriter, _ []item) { http.Error(w, "busy", http.StatusServiceUnavailable) })
	p.Enqueue(target, "3", "3", item{ID: "3"})
	if v := next(); v.Status != Failed || v.Class != ClassStatus {
		t.Fatalf("non-2xx: %+v", v)
	}

	// An answer that comes only after the pusher gave up: unconfirmed.
	late := make(chan struct{})
	t.Cleanup(func() { close(late) })
	setAnswer(func(http.ResponseWriter, []item) { <-late })
	p.Enqueue(target, "4", "4", item{ID: "4"})
	if v := next(); v.Status != Unconfirmed || v.Class != ClassTimeout {
		t.Fatalf("timed out: %+v", v)
	}

	// A URL nothing listens on: failed, nothing reached anyone.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	p.Enqueue(Target{ID: 2, URL: closed, Account: "acct", Secret: secret}, "5", "5", item{ID: "5"})
	if v := next(); v.Status != Failed || v.Class != ClassConnect {
		t.Fatalf("unreachable: %+v", v)
	}
}
