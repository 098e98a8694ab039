package moduletest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/modcli"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/module/web"
)

// TestEach: each database is fresh and the module's SQL and the engine run
// on it; the host's clock is the test's.
func TestEach(t *testing.T) {
	moduletest.Each(t, nil, testEnv[pgx.Tx], testEnv[*sql.Tx])
}

func testEnv[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	ctx := context.Background()
	if _, err := e.DB.Exec(ctx, "CREATE TABLE note (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatalf("%s: a fresh database: %v", e.Name, err)
	}
	b, err := module.NewBase("notes", e.Host(map[string]string{"notes.x": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Add(90 * time.Minute)
	if got := b.Now(); !got.Equal(moduletest.Start.Add(90 * time.Minute)) {
		t.Fatalf("the module reads %v, not the test's clock", got)
	}
	if err := b.Settings().Err(); err == nil {
		t.Fatal("an unknown setting passed")
	}
	if _, err := b.Client(); !errors.Is(err, module.ErrNotStarted) {
		t.Fatalf("client before Start: %v, want ErrNotStarted", err)
	}
	c := e.Client(t, nil)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	if err := b.Bind(c); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Client(); err != nil || got != c {
		t.Fatalf("bound client: %v", err)
	}
	if err := b.Bind(e.Client(t, nil)); err == nil {
		t.Fatal("a second engine client was bound")
	}
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	moduletest.WaitFor(t, 5*time.Second, "five increments", func() bool { return n.Load() == 5 })
}

// TestEnvQueries: one query text with numbered parameters (one used twice)
// counts the same on both databases, and DSN opens the same database from
// another process.
// A module's own environment type embeds the Env, as noteEnv does.
func TestEnvQueries(t *testing.T) {
	moduletest.Each(t, nil, moduletest.With(newNoteEnv[pgx.Tx], testEnvQueries[pgx.Tx]),
		moduletest.With(newNoteEnv[*sql.Tx], testEnvQueries[*sql.Tx]))
}

type noteEnv[TTx any] struct {
	*moduletest.Env[TTx]
	table string
}

func newNoteEnv[TTx any](e *moduletest.Env[TTx]) *noteEnv[TTx] { return &noteEnv[TTx]{e, "note"} }

func testEnvQueries[TTx any](t *testing.T, e *noteEnv[TTx]) {
	ctx := context.Background()
	if e.table != "note" {
		t.Fatalf("the module's environment was not built: %+v", e)
	}
	if _, err := e.DB.Exec(ctx, "CREATE TABLE note (id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.DB.Exec(ctx, e.SQL("INSERT INTO note (id, a, b) VALUES ($1, $2, $2)"), i+1, i%2); err != nil {
			t.Fatalf("%s: a repeated parameter: %v", e.Name, err)
		}
	}
	if n := e.Count(t, "SELECT count(*) FROM note WHERE a = $1 AND b = $1", 0); n != 2 {
		t.Fatalf("%s: counted %d notes, want 2", e.Name, n)
	}
	switch e.Name {
	case "postgres":
		if !strings.Contains(e.DSN, e.Schema) {
			t.Fatalf("DSN %q does not name schema %s", e.DSN, e.Schema)
		}
	case "sqlite":
		if _, err := os.Stat(e.DSN); err != nil {
			t.Fatalf("DSN %q is not the database file: %v", e.DSN, err)
		}
	}
}

// TestEnvEvents: the events backbone a module's test builds runs on the
// test's database under the engine client Run starts, and what Run
// started is stopped, last first, when the test ends.
func TestEnvEvents(t *testing.T) {
	moduletest.Each(t, moduletest.Lines(nil, moduletest.EventsLines), testEnvEvents[pgx.Tx], testEnvEvents[*sql.Tx])
}

// part records its start and stop.
type part[TTx any] struct {
	name string
	log  *[]string
}

func (p *part[TTx]) Start(_ context.Context, c *keel.Client[TTx]) error {
	if c == nil {
		return errors.New("no client")
	}
	*p.log = append(*p.log, "start "+p.name)
	return nil
}

func (p *part[TTx]) Stop(context.Context) error {
	*p.log = append(*p.log, "stop "+p.name)
	return nil
}

func testEnvEvents[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	var log []string
	t.Run("run", func(t *testing.T) {
		ev := e.Events(t, &keelevents.Config{Partitions: 2, StatsInterval: time.Hour})
		cfg := &keel.Config{}
		if err := ev.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		if c := e.Run(t, cfg, &part[TTx]{"a", &log}, ev, &part[TTx]{"b", &log}); c == nil {
			t.Fatal("no engine client")
		}
		if n := e.Count(t, "SELECT count(*) FROM keel_events_outbox"); n != 0 {
			t.Fatalf("%s: a fresh outbox holds %d events", e.Name, n)
		}
	})
	if got := strings.Join(log, ", "); got != "start a, start b, stop b, stop a" {
		t.Fatalf("%s: %s", e.Name, got)
	}
}

// noteRoutes are a module's admin API as the kit's API tests use it.
func noteRoutes() []module.Route {
	return []module.Route{
		{Pattern: "GET /api/v1/notes/{id}", Role: module.RoleViewer, Handle: func(_ http.ResponseWriter, r *http.Request) (int, any, error) {
			switch id := r.PathValue("id"); id {
			case "gone":
				return 0, nil, web.NotFound("no note %s", id)
			case "bad":
				return 0, nil, fmt.Errorf("reading note: %w", keeltype.ErrInvalidArgument)
			case "closed":
				return 0, nil, fmt.Errorf("note %s: %w", id, keeltype.ErrInvalidState)
			case "broken":
				return 0, nil, errors.New("disk on fire")
			default:
				return http.StatusOK, map[string]any{"id": id, "actor": keel.ActorFrom(r.Context())}, nil
			}
		}},
		{Pattern: "POST /api/v1/notes", Role: module.RoleOperator, Handle: func(w http.ResponseWriter, r *http.Request) (int, any, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := web.Decode(w, r, &in); err != nil {
				return 0, nil, err
			}
			return http.StatusCreated, map[string]any{"id": 7, "text": in.Text}, nil
		}},
		{Pattern: "GET /api/v1/notes/{id}/file", Role: module.RoleViewer, Handle: func(w http.ResponseWriter, r *http.Request) (int, any, error) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte("the file"))
			return http.StatusAccepted, nil, nil
		}},
	}
}

// TestServeAPI: the answers a client of Keel's server would get: values
// as JSON, errors as problem documents with their codes and statuses, the
// actor on the request, a handler's own answer untouched.
func TestServeAPI(t *testing.T) {
	t.Parallel()
	base := moduletest.ServeAPI(t, noteRoutes(), "ops").URL
	ok := moduletest.Do(t, base, "GET", "/api/v1/notes/n1", nil, nil)
	if ok.Status != http.StatusOK || ok.Body["id"] != "n1" || ok.Body["actor"] != "ops" || ok.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("a note: %+v", ok)
	}
	as := moduletest.Do(t, base, "GET", "/api/v1/notes/n1", nil, http.Header{moduletest.ActorHeader: {"token:li"}})
	if as.Body["actor"] != "token:li" {
		t.Fatalf("acting as another user: %+v", as)
	}
	for _, c := range []struct {
		id     string
		status int
		code   string
		detail string
	}{
		{"gone", 404, web.CodeNotFound, "no note gone"},
		{"bad", 400, web.CodeInvalidArgument, "reading note: invalid argument"},
		{"closed", 409, web.CodeInvalidState, "note closed: transition not allowed from current state"},
		{"broken", 500, web.CodeInternal, "disk on fire"},
	} {
		a := moduletest.Do(t, base, "GET", "/api/v1/notes/"+c.id, nil, nil)
		if a.Status != c.status || a.Body["code"] != c.code || a.Body["detail"] != c.detail ||
			a.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %v, want %d %s %q", c.id, a.Status, a.Body, c.status, c.code, c.detail)
		}
	}
	if a := moduletest.Do(t, base, "POST", "/api/v1/notes", map[string]any{"text": "hello"}, nil); a.Status != http.StatusCreated || a.Body["text"] != "hello" {
		t.Fatalf("a created note: %+v", a)
	}
	if a := moduletest.Do(t, base, "POST", "/api/v1/notes", `{"text": `, nil); a.Status != http.StatusBadRequest || a.Body["code"] != web.CodeInvalidJSON {
		t.Fatalf("malformed JSON: %+v", a)
	}
	resp, err := http.Get(base + "/api/v1/notes/n1/file")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Content-Type") != "text/plain" || string(b) != "the file" {
		t.Fatalf("a handler's own answer: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

// TestCLI: a module's verb run as a user types it, against the served
// API: its output, --json, a problem as the error's words, its hint on
// standard error.
func TestCLI(t *testing.T) {
	t.Parallel()
	caller := &moduletest.HTTPCaller{Base: moduletest.ServeAPI(t, noteRoutes(), "ops").URL}
	verbs := func(run modcli.Runner) []*cobra.Command {
		get := &cobra.Command{Use: "get ID", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, func(ctx context.Context, e *modcli.Env) error {
				var n struct{ ID, Actor string }
				raw, err := e.API.Call(ctx, "GET", "/api/v1/notes/"+args[0], nil, &n)
				if err != nil || e.Printed(raw) {
					return err
				}
				fmt.Fprintf(e.Out, "note %s (read by %s)\n", n.ID, n.Actor)
				fmt.Fprintln(e.Err, "more: keel notes get NEXT")
				return nil
			})
		}}
		return []*cobra.Command{modcli.Group("notes", "Notes", get)}
	}
	var stderr strings.Builder
	cli := &moduletest.CLI{API: caller, Verbs: verbs, Err: &stderr}
	ctx := context.Background()
	if out, err := cli.Run(ctx, "notes", "get", "n1"); err != nil || out != "note n1 (read by ops)\n" || stderr.String() != "more: keel notes get NEXT\n" {
		t.Fatalf("get: %v %q %q", err, out, stderr.String())
	}
	if out, err := cli.Run(ctx, "notes", "get", "n1", "--json"); err != nil || !strings.HasPrefix(out, `{"actor":"ops","id":"n1"}`) {
		t.Fatalf("get --json: %v %q", err, out)
	}
	if _, err := cli.Run(ctx, "notes", "get", "gone"); err == nil || err.Error() != "no note gone (not_found)" {
		t.Fatalf("an unknown note: %v", err)
	}
	sent := caller.Sent()
	if _, err := cli.Run(ctx, "notes", "get"); err == nil {
		t.Fatal("a verb without its argument ran")
	}
	if caller.Sent() != sent {
		t.Fatal("bad input was sent")
	}
}

// console is a module's home card and search.
type console struct{}

func (console) Home(context.Context) ([]module.Stat, error) {
	return []module.Stat{{Key: "open", Value: 2, Level: module.LevelWarn}, {Key: "done", Value: 5}}, nil
}

func (console) Search(_ context.Context, q string) ([]module.Hit, error) {
	if q != "n1" {
		return nil, nil
	}
	return []module.Hit{{Title: "note n1", Path: "/notes/n1"}, {Title: "its file", Path: "/notes/n1/file"}}, nil
}

// TestConsole: the home card by key and the search's paths, as the
// operator reads them.
func TestConsole(t *testing.T) {
	t.Parallel()
	if s := moduletest.HomeStats(t, console{}); len(s) != 2 || s["open"].Value != 2 || s["open"].Level != module.LevelWarn || s["done"].Value != 5 {
		t.Fatalf("home: %+v", s)
	}
	if p := moduletest.SearchPaths(t, console{}, "n1"); len(p) != 2 || !p["/notes/n1"] || !p["/notes/n1/file"] {
		t.Fatalf("search: %v", p)
	}
	if p := moduletest.SearchPaths(t, console{}, "nothing"); len(p) != 0 {
		t.Fatalf("search for nothing: %v", p)
	}
}

// TestJSONFields: a struct's fields by their JSON names, a Go name where
// there is no tag, and none for a field JSON skips.
func TestJSONFields(t *testing.T) {
	type payload struct {
		PaymentNo string `json:"payment_no"`
		Late      bool   `json:"late,omitempty"`
		OnHand    int64
		Secret    string `json:"-"`
	}
	got := moduletest.JSONFields(payload{})
	if strings.Join(got, ",") != "payment_no,late,OnHand" {
		t.Errorf("JSONFields: %v", got)
	}
}
