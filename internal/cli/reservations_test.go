package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/modules/reservation"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
)

// rsvServer is `keel serve` running in process on PostgreSQL with the
// reservation module, and tokens per role.
type rsvServer struct {
	url    string
	dbURL  string
	tokens map[auth.Role]string
}

func startReservationServer(t *testing.T) *rsvServer {
	t.Helper()
	_, schema := testdb.OpenPostgres(t, &testdb.Options{Bare: true})
	dbURL := testdb.ServeURL(t, schema)
	flags := map[string]string{"database-url": dbURL, "schema": schema, "addr": "127.0.0.1:0",
		"cookie-secure": "false", "log-level": "error", "shutdown-timeout": "10s", "module-settings": testModuleSettings(t)}
	o, err := cli.ResolveServe("", func(string) string { return "" }, flags)
	if err != nil {
		t.Fatal(err)
	}
	type running struct {
		srv   *server.Server
		store *auth.Store
	}
	ready := make(chan running, 1)
	o.Ready = func(srv *server.Server, store *auth.Store) { ready <- running{srv, store} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Serve(ctx, o, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve shut down with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not shut down within 30s")
		}
	})
	var r running
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve not ready within 60s")
	}
	s := &rsvServer{url: r.srv.URL(), dbURL: dbURL, tokens: map[auth.Role]string{}}
	for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		secret, _, err := r.store.CreateToken(ctx, "rsv-"+role.String(), role, "test", "reservation verbs")
		if err != nil {
			t.Fatal(err)
		}
		s.tokens[role] = secret
	}
	return s
}

// rsvCLI runs the reservation verbs against the server with one token.
type rsvCLI struct {
	t           *testing.T
	o           *cli.AdminOpts
	out, errOut bytes.Buffer
}

// verb is a `keel reservations` command line (without "keel reservations").
type verb = []string

func (s *rsvServer) cli(t *testing.T, role auth.Role) *rsvCLI {
	r := &rsvCLI{t: t}
	r.o = &cli.AdminOpts{Server: s.url, Token: s.tokens[role], Out: &r.out, Err: &r.errOut}
	return r
}

// run runs the verb as the binary does: the installed modules' commands,
// freshly built (cobra keeps flag values between runs), through the
// module runner.
func (r *rsvCLI) run(args verb) error {
	r.out.Reset()
	r.errOut.Reset()
	root := &cobra.Command{Use: "keel", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cli.ModuleCommands(cli.ModuleRunner(func(*cobra.Command) *cli.AdminOpts { return r.o }))...)
	root.SetArgs(append([]string{"reservations"}, args...))
	root.SetOut(&r.out)
	root.SetErr(&r.errOut)
	return root.ExecuteContext(context.Background())
}

func (r *rsvCLI) must(f verb) string {
	r.t.Helper()
	if err := r.run(f); err != nil {
		r.t.Fatalf("%v\n%s%s", err, r.out.String(), r.errOut.String())
	}
	return r.out.String()
}

func (r *rsvCLI) fails(f verb, want ...string) {
	r.t.Helper()
	err := r.run(f)
	if err == nil {
		r.t.Fatalf("no error; want %q\n%s", want, r.out.String())
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			r.t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// call sends one raw request to the module's API (the test's setup).
func (r *rsvCLI) call(method, path string, in, out any) {
	r.t.Helper()
	err := cli.WithRemoteAPI(context.Background(), r.o, "reservations", func(ctx context.Context, c *cli.APIClient) error {
		_, err := c.Call(ctx, method, "/api/v1/reservation"+path, in, out)
		return err
	})
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
}

// flags turns name/value pairs into flags, leaving out the empty ones.
func flags(args verb, pairs ...string) verb {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			args = append(args, "--"+pairs[i], pairs[i+1])
		}
	}
	return args
}

// limit is a --limit value, "" (the default) for 0.
func limit(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

type rsvFilter struct {
	State, SlotID, User string
	Limit               int
	After               string
}

func rsvList(f rsvFilter) verb {
	return flags(verb{"list"}, "state", f.State, "slot", f.SlotID, "user", f.User, "limit", limit(f.Limit), "after", f.After)
}

func rsvGet(id string) verb { return verb{"get", id} }

func rsvAction(action, id, reason string) verb {
	return flags(verb{action, id}, "reason", reason)
}

type slotFilter struct {
	ResourceID, From, To string
}

func rsvSlots(f slotFilter) verb {
	return flags(verb{"slots"}, "resource", f.ResourceID, "from", f.From, "to", f.To)
}

type runFilter struct {
	Kind  string
	Limit int
	After string
}

func rsvRuns(f runFilter) verb {
	return flags(verb{"runs"}, "kind", f.Kind, "limit", limit(f.Limit), "after", f.After)
}

// rsvFixture is what the setup created: a slot in the future with two paid
// reservations, and a slot already started whose paid reservation was
// released as a no-show.
type rsvFixture struct {
	resource, future, started int64
	u1, u2, u3                string
}

func (s *rsvServer) fixture(t *testing.T) *rsvFixture {
	adm := s.cli(t, auth.RoleAdmin)
	adm.call("POST", "/categories", map[string]any{"id": "desk", "name_zh": "工位", "name_en": "Desk", "grace_minutes": 0,
		"appeal_minutes": 120, "hold_minutes": 10, "release_mode": "on", "reason": "opening desks"}, nil)
	var res reservation.Resource
	adm.call("POST", "/resources", map[string]any{"category_id": "desk", "name": "A-01", "location": "3F"}, &res)
	now := time.Now().UTC().Truncate(time.Second)
	slot := func(start, end time.Time, capacity int) int64 {
		var sl reservation.Slot
		adm.call("POST", "/slots", map[string]any{"resource_id": res.ID, "starts_at": start, "ends_at": end, "capacity": capacity}, &sl)
		return sl.ID
	}
	f := &rsvFixture{resource: res.ID, future: slot(now.Add(time.Hour), now.Add(2*time.Hour), 3),
		started: slot(now.Add(-10*time.Minute), now.Add(2*time.Hour), 2)}
	op := s.cli(t, auth.RoleOperator)
	book := func(slotID int64, user string) string {
		var r reservation.Reservation
		op.call("POST", "/reservations", map[string]any{"slot_id": slotID, "user_id": user}, &r)
		op.call("POST", "/reservations/"+strconv.FormatInt(r.ID, 10)+"/pay", map[string]any{}, &r)
		return strconv.FormatInt(r.ID, 10)
	}
	f.u1, f.u2, f.u3 = book(f.future, "u1"), book(f.future, "u2"), book(f.started, "u3")
	// u3's release point (start + 0 grace) has passed: its release job or
	// this scan releases it, whichever comes first.
	op.call("POST", "/runs", map[string]string{"reason": "release the test no-show"}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var d reservation.ReservationDetail
		op.call("GET", "/reservations/"+f.u3, nil, &d)
		if d.Reservation.State == reservation.StateReleased {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("u3 not released: %+v", d.Reservation)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func rows(out string) int { return strings.Count(strings.TrimSpace(out), "\n") }

// TestReservationVerbs runs every `keel reservations` verb against a real
// server with the reservation module on PostgreSQL.
func TestReservationVerbs(t *testing.T) {
	t.Parallel()
	s := startReservationServer(t)
	f := s.fixture(t)
	op := s.cli(t, auth.RoleOperator)

	t.Run("list", func(t *testing.T) {
		op.t = t
		out := op.must(rsvList(rsvFilter{}))
		matches(t, out, `(?m)^ID\s+USER\s+RESOURCE/SLOT\s+STATE\s+STARTS\s+EXPECTED RELEASE$`)
		matches(t, out, fmt.Sprintf(`(?m)^%s\s+u3\s+%d/%d\s+released \(no-show\)\s+\S+ \S+ UTC\S*\s+\S+ \S+ UTC\S*$`, f.u3, f.resource, f.started))
		matches(t, out, fmt.Sprintf(`(?m)^%s\s+u1\s+%d/%d\s+paid, awaiting check-in\s+`, f.u1, f.resource, f.future))
		if rows(out) != 3 {
			t.Fatalf("want 3 reservations:\n%s", out)
		}
		if out = op.must(rsvList(rsvFilter{State: "paid"})); rows(out) != 2 || strings.Contains(out, "u3") {
			t.Fatalf("--state paid:\n%s", out)
		}
		if out = op.must(rsvList(rsvFilter{SlotID: strconv.FormatInt(f.started, 10)})); rows(out) != 1 || !strings.Contains(out, "u3") {
			t.Fatalf("--slot:\n%s", out)
		}
		if out = op.must(rsvList(rsvFilter{User: "u2"})); rows(out) != 1 || !strings.Contains(out, "u2") {
			t.Fatalf("--user:\n%s", out)
		}
		out = op.must(rsvList(rsvFilter{Limit: 2}))
		cursor := regexp.MustCompile(`more: --after (\S+)`).FindStringSubmatch(op.errOut.String())
		if rows(out) != 2 || cursor == nil || !strings.Contains(out, "u3") {
			t.Fatalf("first page of two:\n%s%s", out, op.errOut.String())
		}
		out = op.must(rsvList(rsvFilter{Limit: 2, After: cursor[1]}))
		if rows(out) != 1 || !strings.Contains(out, "u1") || op.errOut.Len() != 0 {
			t.Fatalf("second page:\n%s%s", out, op.errOut.String())
		}
		op.fails(rsvList(rsvFilter{State: "gone"}), `unknown reservation state "gone"`, "checked_in")
		op.fails(rsvList(rsvFilter{SlotID: "x"}), `slot ID must be a positive integer, got "x"`)
		op.fails(rsvList(rsvFilter{After: "nonsense"}), "invalid_cursor")
		op.fails(rsvList(rsvFilter{Limit: 1001}), "limit")
	})

	t.Run("get", func(t *testing.T) {
		op.t = t
		out := op.must(rsvGet(f.u3))
		matches(t, out, fmt.Sprintf(`(?m)^reservation %s  user u3  released \(no-show\)$`, f.u3))
		matches(t, out, `(?m)^appeal until\s+\S+ \S+ UTC\S*$`)
		matches(t, out, `(?m)^AT\s+FROM → TO\s+ACTOR\s+REASON$`)
		matches(t, out, `(?m)^\S+ \S+ UTC\S*\s+\(new\) → awaiting payment\s+\S+\s+booked$`)
		matches(t, out, `(?m)^\S+ \S+ UTC\S*\s+awaiting payment → paid, awaiting check-in\s+\S+\s+paid$`)
		matches(t, out, `(?m)^\S+ \S+ UTC\S*\s+paid, awaiting check-in → released \(no-show\)\s+`)
		matches(t, out, `(?m)^release notice\s+`)
		op.fails(rsvGet("999999"), "no reservation 999999", "not_found")
		op.fails(rsvGet("abc"), `reservation ID must be a positive integer, got "abc"`)
	})

	t.Run("checkin and cancel", func(t *testing.T) {
		op.t = t
		matches(t, op.must(rsvAction("checkin", f.u1, "")), fmt.Sprintf(`^reservation %s checked in \(now checked in, version \d+\)\n$`, f.u1))
		op.fails(rsvAction("checkin", f.u1, ""), "invalid_state")
		matches(t, op.must(rsvAction("cancel", f.u2, "changed plans")), fmt.Sprintf(`^reservation %s cancelled \(now cancelled,`, f.u2))
		matches(t, op.must(rsvGet(f.u2)), `(?m)paid, awaiting check-in → cancelled\s+token:rsv-operator\s+changed plans$`)
		op.fails(rsvAction("cancel", "999999", ""), "no reservation 999999")
		op.fails(rsvAction("pay", f.u2, ""), `unknown verb "pay"`, "checkin")
		viewer := s.cli(t, auth.RoleViewer)
		viewer.fails(rsvAction("cancel", f.u1, ""), "forbidden")
	})

	t.Run("restore", func(t *testing.T) {
		op.t = t
		op.fails(rsvAction("restore", f.u3, ""), "--reason is required", "at least 5 characters")
		op.fails(rsvAction("restore", f.u3, "  ok "), "--reason is required")
		matches(t, op.must(rsvAction("restore", f.u3, "was at the door")), fmt.Sprintf(`^reservation %s restored \(now restored on appeal,`, f.u3))
		matches(t, op.must(rsvGet(f.u3)), `(?m)released \(no-show\) → restored on appeal\s+token:rsv-operator\s+was at the door$`)
		op.fails(rsvAction("restore", f.u3, "once more please"), "invalid_state")
	})

	t.Run("slots", func(t *testing.T) {
		op.t = t
		out := op.must(rsvSlots(slotFilter{}))
		matches(t, out, `(?m)^SLOT\s+RESOURCE\s+STARTS\s+ENDS\s+CAPACITY\s+HELD\s+FREE\s+WAITING$`)
		// The started slot: u3 restored holds one of two places; the future
		// one: u1 checked in, u2 cancelled.
		matches(t, out, fmt.Sprintf(`(?m)^%d\s+%d A-01\s+\S+ \S+ UTC\S*\s+\S+ \S+ UTC\S*\s+2\s+1\s+1\s+0$`, f.started, f.resource))
		matches(t, out, fmt.Sprintf(`(?m)^%d\s+%d A-01\s+\S+ \S+ UTC\S*\s+\S+ \S+ UTC\S*\s+3\s+1\s+2\s+0$`, f.future, f.resource))
		if out = op.must(rsvSlots(slotFilter{ResourceID: "999999"})); rows(out) != 0 {
			t.Fatalf("--resource of nothing:\n%s", out)
		}
		op.fails(rsvSlots(slotFilter{ResourceID: "0"}), "resource ID must be a positive integer")
		op.fails(rsvSlots(slotFilter{From: "tomorrow"}), "--from must be an RFC 3339 time")
	})

	t.Run("runs", func(t *testing.T) {
		op.t = t
		// The fixture ran one scan; a second one makes two pages of one.
		op.call("POST", "/runs", map[string]string{"reason": "a second scan for paging"}, nil)
		out := op.must(rsvRuns(runFilter{Kind: "scan"}))
		matches(t, out, `(?m)^RUN\s+KIND\s+STARTED\s+DURATION\s+SCANNED\s+RELEASED\s+FAILED\s+ERRORS$`)
		matches(t, out, `(?m)^\d+\s+release scan\s+\S+ \S+ UTC\S*\s+\S+\s+\d+\s+\d+\s+0\s*$`)
		out = op.must(rsvRuns(runFilter{Limit: 1}))
		cursor := regexp.MustCompile(`more: --after (\S+)`).FindStringSubmatch(op.errOut.String())
		if rows(out) != 1 || cursor == nil {
			t.Fatalf("first page of one run:\n%s%s", out, op.errOut.String())
		}
		if out = op.must(rsvRuns(runFilter{Limit: 1, After: cursor[1]})); rows(out) != 1 {
			t.Fatalf("second page of runs:\n%s", out)
		}
		op.fails(rsvRuns(runFilter{Kind: "sweep"}), `unknown run kind "sweep"`)
	})

	t.Run("dead letters", func(t *testing.T) {
		op.t = t
		out := op.must(verb{"dead-letters"})
		if strings.TrimSpace(out) != "ID  USER  RESOURCE/SLOT  STATE  RETRIES  DEAD SINCE  LAST ERROR" {
			t.Fatalf("dead letters:\n%q", out)
		}
		requeue := func(id, reason string) verb { return flags(verb{"requeue", id}, "reason", reason) }
		op.fails(requeue(f.u1, ""), "--reason is required")
		op.fails(requeue(f.u1, "retry the release"), "not_dead_letter")
	})

	t.Run("json", func(t *testing.T) {
		op.t = t
		op.o.JSON = true
		defer func() { op.o.JSON = false }()
		var d reservation.ReservationDetail
		if err := json.Unmarshal([]byte(op.must(rsvGet(f.u3))), &d); err != nil || d.Reservation.UserID != "u3" || len(d.History) < 4 {
			t.Fatalf("get --json: %+v %v", d, err)
		}
		if out := op.must(rsvList(rsvFilter{})); !strings.HasPrefix(out, `{"data":[`) {
			t.Fatalf("list --json: %s", out)
		}
	})

	t.Run("needs a server", func(t *testing.T) {
		var out bytes.Buffer
		o := &cli.AdminOpts{DatabaseURL: s.dbURL, Out: &out, Err: &out}
		err := cli.WithRemoteAPI(context.Background(), o, "reservations", func(context.Context, *cli.APIClient) error {
			t.Fatal("the verb ran in local mode")
			return nil
		})
		want := "keel reservations acts through a running server: pass --server URL (or KEEL_SERVER) and KEEL_TOKEN"
		if err == nil || err.Error() != want {
			t.Fatalf("local mode: %v", err)
		}
		o = &cli.AdminOpts{Server: s.url, Out: &out, Err: &out}
		if err := cli.WithRemoteAPI(context.Background(), o, "reservations", nil); err == nil || !strings.Contains(err.Error(), "KEEL_TOKEN") {
			t.Fatalf("no token: %v", err)
		}
	})
}
