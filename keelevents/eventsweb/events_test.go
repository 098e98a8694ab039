package eventsweb_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/keelwork/keel/keelevents"
)

// TestEventsAPI reads the outbox per topic, the consumers with their lag,
// the quarantined and manual events, and replays a manual event after a
// refused replay (bad reasons, unknown ids, a handler still failing).
func TestEventsAPI(t *testing.T) {
	each(t, testEventsAPI)
}

func testEventsAPI(t *testing.T, s *served) {
	s.seedEvents()
	var topics list[keelevents.TopicStats]
	s.call("vera", "GET", "/api/v1/events/topics", nil, &topics)
	if len(topics.Data) != 1 || topics.Data[0].Topic != "stock.reserved" || topics.Data[0].Backlog != 0 {
		t.Fatalf("topics: %+v", topics.Data)
	}
	var consumers list[keelevents.ConsumerStats]
	s.call("vera", "GET", "/api/v1/events/consumers", nil, &consumers)
	if len(consumers.Data) != 1 || consumers.Data[0].Manual != 1 || consumers.Data[0].Quarantined != 1 {
		t.Fatalf("consumers: %+v", consumers.Data)
	}
	var manual list[keelevents.ManualEvent]
	s.call("vera", "GET", "/api/v1/events/manual?state=manual", nil, &manual)
	if len(manual.Data) != 1 || manual.Data[0].Message.ID != "r-poison" || !strings.Contains(manual.Data[0].LastError, "SKU") {
		t.Fatalf("manual: %+v", manual.Data)
	}
	path := fmt.Sprintf("/api/v1/events/manual/%d/replay", manual.Data[0].ID)
	for _, b := range []struct {
		name, user, path string
		body             any
		status           int
		code             string
	}{
		{"blank reason", "alice", path, map[string]string{"reason": " "}, 400, "invalid_argument"},
		{"NUL reason", "alice", path, map[string]string{"reason": "fixed\u0000 it"}, 400, "invalid_argument"},
		{"long reason", "alice", path, map[string]string{"reason": strings.Repeat("x", 1001)}, 400, "invalid_argument"},
		{"unknown id", "alice", "/api/v1/events/manual/999999/replay", map[string]string{"reason": "mapping fixed"}, 404, "not_found"},
		{"bad id", "alice", "/api/v1/events/manual/x/replay", map[string]string{"reason": "mapping fixed"}, 400, "invalid_argument"},
		{"viewer", "vera", path, map[string]string{"reason": "mapping fixed"}, 403, "forbidden"},
		{"still failing", "alice", path, map[string]string{"reason": "try once more"}, 409, "replay_failed"},
	} {
		st, raw := s.call(b.user, "POST", b.path, b.body, nil)
		if st != b.status || problemCode(raw) != b.code {
			t.Errorf("%s: %d %s, want %d %s", b.name, st, raw, b.status, b.code)
		}
	}
	if st, raw := s.call("vera", "GET", "/api/v1/events/event?topic=stock.reserved&id=bad%20id", nil, nil); st != 400 {
		t.Errorf("bad event id: %d %s", st, raw)
	}
	if st, _ := s.call("vera", "GET", "/api/v1/events/event?topic=stock.reserved&id=nope", nil, nil); st != 404 {
		t.Errorf("unknown event: %d", st)
	}
	if n := s.audits("events.replay"); n != 0 {
		t.Fatalf("refused replays audited as done: %d", n)
	}
	s.feed.Poisoned.Store(false)
	var m keelevents.ManualEvent
	if st, raw := s.call("alice", "POST", path, map[string]string{"reason": "SKU 映射已修复"}, &m); st != http.StatusOK || m.State != "replayed" {
		t.Fatalf("replay: %d %s", st, raw)
	}
	if st, raw := s.call("alice", "POST", path, map[string]string{"reason": "SKU 映射已修复"}, nil); st != 409 && st != 404 {
		t.Fatalf("second replay: %d %s", st, raw)
	}
	var d keelevents.EventDetail
	s.call("vera", "GET", "/api/v1/events/event?topic=stock.reserved&id=r-poison", nil, &d)
	if len(d.Inbox) != 1 || d.Inbox[0].State != "applied" {
		t.Fatalf("event after replay: %+v", d)
	}
	if n := s.audits("events.replay"); n != 1 {
		t.Fatalf("replay audits: %d", n)
	}
}

// TestReplayUnregisteredConsumer replays a manual event whose consumer no
// longer runs in the process (retired from the deployment, or served by
// another one): the answer is a problem with a stable code saying so, the
// event stays manual and nothing is audited as replayed.
func TestReplayUnregisteredConsumer(t *testing.T) {
	each(t, testReplayUnregisteredConsumer)
}

func testReplayUnregisteredConsumer(t *testing.T, s *served) {
	s.seedEvents()
	var manual list[keelevents.ManualEvent]
	s.call("vera", "GET", "/api/v1/events/manual?state=manual", nil, &manual)
	if len(manual.Data) != 1 {
		t.Fatalf("manual: %+v", manual.Data)
	}
	id := manual.Data[0].ID
	// The consumer that failed is renamed to one this process does not
	// register, as if its module had been removed.
	if n := s.count(fmt.Sprintf("SELECT count(*) FROM keel_events_manual WHERE id = %d", id)); n != 1 {
		t.Fatalf("manual rows: %d", n)
	}
	s.exec(fmt.Sprintf("UPDATE keel_events_manual SET consumer = 'retired' WHERE id = %d", id))
	s.feed.Poisoned.Store(false)
	path := fmt.Sprintf("/api/v1/events/manual/%d/replay", id)
	st, raw := s.call("alice", "POST", path, map[string]string{"reason": "mapping fixed"}, nil)
	if st != http.StatusConflict || problemCode(raw) != "consumer_not_registered" {
		t.Fatalf("replay of an unregistered consumer: %d %s, want 409 consumer_not_registered", st, raw)
	}
	if !strings.Contains(string(raw), "retired") {
		t.Fatalf("the problem does not name the consumer: %s", raw)
	}
	var m keelevents.ManualEvent
	if st, raw := s.call("vera", "GET", fmt.Sprintf("/api/v1/events/manual/%d", id), nil, &m); st != 200 || m.State != "manual" {
		t.Fatalf("after the refused replay: %d %s", st, raw)
	}
	if n := s.audits("events.replay") + s.audits("events.replay_failed"); n != 0 {
		t.Fatalf("a refused replay was audited: %d", n)
	}
}
