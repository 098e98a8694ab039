package reservation

import (
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// serveAPI mounts the module's routes the way the server does: absolute
// ServeMux patterns, the caller's actor on the context, JSON bodies and
// problem documents with the module's codes.
func serveAPI[TTx any](m *Module[TTx], actor string) *httptest.Server {
	mux := http.NewServeMux()
	for _, rt := range m.Routes() {
		handle := rt.Handle
		mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
			r = r.WithContext(keel.WithActor(r.Context(), actor))
			status, body, err := handle(w, r)
			if err != nil {
				status, code := problemOf(err)
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(status)
				_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "code": code, "detail": err.Error()})
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(body)
		})
	}
	return httptest.NewServer(mux)
}

func problemOf(err error) (int, string) {
	var me *module.Error
	switch {
	case errors.As(err, &me):
		return me.Status, me.Code
	case errors.Is(err, keeltype.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, keeltype.ErrInvalidArgument):
		return http.StatusBadRequest, "invalid_argument"
	case errors.Is(err, keeltype.ErrInvalidState):
		return http.StatusConflict, "invalid_state"
	}
	return http.StatusInternalServerError, "internal"
}

type apiClient struct {
	t   *testing.T
	srv *httptest.Server
}

// call sends a request and decodes the answer into out (when non-nil); it
// returns the status and, for problems, the code.
func (c apiClient) call(method, path, body string, out any) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.srv.URL+apiPrefix+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		var p struct{ Code string }
		_ = json.Unmarshal(raw, &p)
		return resp.StatusCode, p.Code
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, ""
}

// must is call expecting want.
func (c apiClient) must(want int, method, path, body string, out any) {
	c.t.Helper()
	if got, code := c.call(method, path, body, out); got != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, got, code, want)
	}
}

// problem is call expecting a problem with code.
func (c apiClient) problem(code, method, path, body string) {
	c.t.Helper()
	if _, got := c.call(method, path, body, nil); got != code {
		c.t.Fatalf("%s %s: code %q, want %q", method, path, got, code)
	}
}

func TestAPI(t *testing.T) {
	runBoth(t, testAPI[pgx.Tx], testAPI[*sql.Tx])
}

func testAPI[TTx any](t *testing.T, e *env[TTx]) {
	m := e.module(t)
	srv := serveAPI(m, "user:ops")
	defer srv.Close()
	c := apiClient{t, srv}

	c.problem("invalid_argument", "POST", "/categories", `{"id":"ws","name_zh":"工位","name_en":"Desk","grace_minutes":15,"hold_minutes":10,"release_mode":"on","reason":"x"}`)
	c.problem("invalid_argument", "POST", "/categories", `{"id":"ws","name_zh":"工位","name_en":"Desk","grace_minutes":15,"hold_minutes":10,"release_mode":"on","bands":[{"from":"25:00","to":"26:00","grace_minutes":5}],"reason":"opening desks"}`)
	c.problem("unknown_field", "POST", "/categories", `{"id":"ws","grace":15,"reason":"opening desks"}`)
	var cat Category
	c.must(201, "POST", "/categories", `{"id":"ws","name_zh":"工位","name_en":"Desk","grace_minutes":15,"reminder_minutes":15,"appeal_minutes":30,"hold_minutes":10,"release_mode":"on","bands":[{"from":"11:00","to":"13:00","grace_minutes":5}],"reason":"opening desks"}`, &cat)
	if len(cat.Bands) != 1 || cat.Version != 1 {
		t.Fatalf("category: %+v", cat)
	}
	var res Resource
	c.must(201, "POST", "/resources", `{"category_id":"ws","name":"A-01","location":"3F"}`, &res)
	var slot Slot
	c.must(201, "POST", "/slots", `{"resource_id":1,"starts_at":"2030-01-07T10:00:00+08:00","ends_at":"2030-01-07T11:00:00+08:00","capacity":3}`, &slot)
	if !slot.StartsAt.Equal(t0) || slot.Available != 3 {
		t.Fatalf("slot: %+v", slot)
	}
	var slots listPage[Slot]
	c.must(200, "GET", "/slots?from=2030-01-07T00:00:00Z", "", &slots)
	if len(slots.Data) != 1 {
		t.Fatalf("slots: %+v", slots)
	}
	var ids []int64
	for _, u := range []string{"u1", "u2", "u3"} {
		var r Reservation
		c.must(201, "POST", "/reservations", `{"slot_id":1,"user_id":"`+u+`"}`, &r)
		c.must(200, "POST", "/reservations/"+itoa(r.ID)+"/pay", `{}`, &r)
		if r.State != StatePaid || r.ExpectedReleaseAt == nil {
			t.Fatalf("paid: %+v", r)
		}
		ids = append(ids, r.ID)
	}
	c.problem("slot_full", "POST", "/reservations", `{"slot_id":1,"user_id":"u4"}`)
	c.must(201, "POST", "/slots/1/waitlist", `{"user_id":"u4"}`, nil)

	// Cursor paging, newest first.
	var seen []int64
	cursor := ""
	for {
		var p listPage[Reservation]
		c.must(200, "GET", "/reservations?state=paid&limit=2&cursor="+cursor, "", &p)
		for _, r := range p.Data {
			seen = append(seen, r.ID)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 3 || seen[0] != ids[2] || seen[2] != ids[0] {
		t.Fatalf("paged %v", seen)
	}
	c.problem("invalid_cursor", "GET", "/reservations?cursor=bm9wZQ", "")
	c.problem("invalid_argument", "GET", "/reservations?state=gone", "")
	c.problem("invalid_argument", "GET", "/reservations?colour=red", "")
	c.problem("not_found", "GET", "/reservations/999", "")

	c.must(200, "POST", "/reservations/"+itoa(ids[0])+"/check-in", `{}`, nil)
	c.problem("invalid_state", "POST", "/reservations/"+itoa(ids[0])+"/cancel", `{"reason":"changed mind"}`)
	c.problem("version_conflict", "POST", "/reservations/"+itoa(ids[1])+"/cancel", `{"version":1}`)

	// Past the release point (grace 15: 10:00 is outside the peak band), the
	// availability read releases the two no-shows and offers one place to
	// the waitlist.
	e.clock.Set(t0.Add(15 * time.Minute))
	var avail struct {
		Slot     Slot            `json:"slot"`
		Waitlist []WaitlistEntry `json:"waitlist"`
	}
	c.must(200, "GET", "/slots/1", "", &avail)
	if avail.Slot.Held != 2 || avail.Waitlist[0].State != "offered" {
		t.Fatalf("after the assist: %+v", avail)
	}
	var d ReservationDetail
	c.must(200, "GET", "/reservations/"+itoa(ids[1]), "", &d)
	if d.Reservation.State != StateReleased || len(d.History) != 3 || !hasKind(d.Notifications, kindRelease) {
		t.Fatalf("detail: %+v", d)
	}
	c.problem("invalid_argument", "POST", "/reservations/"+itoa(ids[1])+"/restore", `{}`)
	c.must(200, "POST", "/reservations/"+itoa(ids[1])+"/restore", `{"reason":"was at the door"}`, &d.Reservation)
	if d.Reservation.State != StateRestored {
		t.Fatalf("restored: %+v", d.Reservation)
	}

	c.problem("version_conflict", "PUT", "/categories/ws", `{"version":9,"name_zh":"工位","name_en":"Desk","grace_minutes":15,"hold_minutes":10,"release_mode":"dry_run","reason":"gray rollout"}`)
	c.must(200, "PUT", "/categories/ws", `{"version":1,"name_zh":"工位","name_en":"Desk","grace_minutes":15,"hold_minutes":10,"release_mode":"dry_run","reason":"gray rollout"}`, &cat)
	if cat.ReleaseMode != ModeDryRun || cat.UpdatedBy != "user:ops" {
		t.Fatalf("updated: %+v", cat)
	}
	var run Run
	c.must(200, "POST", "/runs", `{"reason":"checking after the switch"}`, &run)
	var runs listPage[Run]
	c.must(200, "GET", "/runs?kind=scan&limit=1", "", &runs)
	if len(runs.Data) != 1 || runs.Data[0].ID != run.ID {
		t.Fatalf("runs: %+v", runs)
	}
	var dead listPage[Reservation]
	c.must(200, "GET", "/dead-letters", "", &dead)
	if dead.Data == nil || len(dead.Data) != 0 {
		t.Fatalf("dead letters: %+v", dead)
	}
	var inv InvariantReport
	c.must(200, "GET", "/invariant", "", &inv)
	if len(inv.Drifts) != 0 || inv.DoubleReleases != 0 {
		t.Fatalf("invariant: %+v", inv)
	}
	var pol Policy
	c.must(200, "GET", "/policy", "", &pol)
	c.must(200, "PUT", "/policy", `{"enabled":true,"threshold":2,"window_days":365,"restrict_days":30,"version":`+itoa(pol.Version)+`,"reason":"peak-hour abuse"}`, &pol)
	var rec NoShowRecord
	c.must(200, "GET", "/users/u3/noshows", "", &rec)
	if rec.Total != 1 {
		t.Fatalf("no-shows of u3: %+v", rec)
	}
	c.problem("not_restricted", "POST", "/users/u3/restriction/lift", `{"reason":"no restriction yet"}`)
	c.must(200, "POST", "/users/u3/noshows/reset", `{"reason":"reviewed with the store"}`, &rec)
	if rec.InWindow != 0 {
		t.Fatalf("after reset: %+v", rec)
	}
}

func TestRouteRoles(t *testing.T) {
	m := newSQLiteEnv(t).module(t)
	seen := map[string]bool{}
	for _, r := range m.Routes() {
		method, path, _ := strings.Cut(r.Pattern, " ")
		if seen[r.Pattern] || !strings.HasPrefix(path, apiPrefix+"/") {
			t.Fatalf("bad or duplicate route %q", r.Pattern)
		}
		seen[r.Pattern] = true
		switch {
		case method == "GET" && r.Role != module.RoleViewer:
			t.Errorf("%s: reads are for viewers", r.Pattern)
		case method != "GET" && r.Role < module.RoleOperator:
			t.Errorf("%s: actions need an operator", r.Pattern)
		case (strings.Contains(path, "/categories") || strings.Contains(path, "/policy") || strings.Contains(path, "/noshows/reset")) &&
			method != "GET" && r.Role != module.RoleAdmin:
			t.Errorf("%s: settings need an administrator", r.Pattern)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
