package alarm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/modcli"
	"github.com/keelwork/keel/module/moduletest"
	mweb "github.com/keelwork/keel/module/web"
)

func serveRoutes[TTx any](t *testing.T, m *Module[TTx], actor string) *httptest.Server {
	mux := http.NewServeMux()
	for _, rt := range m.Routes() {
		handle := rt.Handle
		mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
			r = r.WithContext(keel.WithActor(r.Context(), actor))
			status, body, err := handle(w, r)
			if err != nil {
				status, code := http.StatusInternalServerError, "internal"
				if p, ok := mweb.As(err); ok {
					status, code = p.Status, p.Code
				} else if errors.Is(err, keeltype.ErrNotFound) {
					status, code = http.StatusNotFound, "not_found"
				} else if errors.Is(err, keeltype.ErrInvalidArgument) {
					status, code = http.StatusBadRequest, "invalid_argument"
				}
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
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestAlarmCommands runs the `keel alarm` verbs through cobra against the
// module's API: a severe instance listed and acknowledged, a silence, the
// storm panel, --json; bad input is refused before anything is sent.
func TestAlarmCommands(t *testing.T) {
	moduletest.Each(t, Lines, testCommands, testCommands)
}

func testCommands[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	ctx := context.Background()
	r := start(t, e, nil)
	r.devices("d1")
	r.mustSend("d1", "temp", 130, 1, 1) // severe: an instance at once
	l := r.instances("d1")
	if len(l) != 1 {
		t.Fatalf("instances of d1: %d", len(l))
	}
	id := l[0].ID
	caller := &moduletest.HTTPCaller{Base: serveRoutes(t, r.m, "ops").URL}
	run := func(args ...string) (string, error) {
		var out, hints bytes.Buffer
		runner := func(cmd *cobra.Command, work func(ctx context.Context, e *modcli.Env) error) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			return work(cmd.Context(), &modcli.Env{API: caller, JSON: asJSON, Out: &out, Err: &hints})
		}
		root := &cobra.Command{Use: "keel", SilenceUsage: true, SilenceErrors: true}
		root.PersistentFlags().Bool("json", false, "")
		root.AddCommand(commands(runner)...)
		root.SetArgs(args)
		root.SetOut(io.Discard)
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	out, err := run("alarm", "instances")
	if err != nil || !strings.Contains(out, "INSTANCE") || !strings.Contains(out, id) || !strings.Contains(out, "firing") {
		t.Fatalf("instances: %v\n%s", err, out)
	}
	if out, err = run("alarm", "instances", "--state", "firing", "--device", "d1", "--json"); err != nil || !json.Valid([]byte(out)) || !strings.Contains(out, id) {
		t.Fatalf("instances --json: %v\n%s", err, out)
	}
	if out, err = run("alarm", "ack", id, "--comment", "on my way"); err != nil || !strings.Contains(out, id+" is acknowledged (by ops)") {
		t.Fatalf("ack: %v\n%s", err, out)
	}
	if i, _ := r.m.InstanceByID(ctx, id); i == nil || i.State != StAcked || i.AckedBy != "ops" || i.AckComment != "on my way" {
		t.Fatalf("after ack: %+v", i)
	}
	if out, err = run("alarm", "ack", id); err != nil || !strings.Contains(out, "acknowledged") {
		t.Fatalf("ack again (the same outcome): %v\n%s", err, out)
	}
	if _, err = run("alarm", "ack", "AL000000nothere"); err == nil || !strings.Contains(err.Error(), "no alarm instance AL000000nothere") {
		t.Fatalf("ack of an unknown instance: %v", err)
	}
	if out, err = run("alarm", "silence", "--device", "d1", "--comment", "boiler maintenance", "--for", "2h"); err != nil || !strings.Contains(out, "silence ") {
		t.Fatalf("silence: %v\n%s", err, out)
	}
	if s, _ := r.m.Silences(ctx, 10); len(s) != 1 || s[0].Device != "d1" || s[0].CreatedBy != "ops" {
		t.Fatalf("silences after the verb: %+v", s)
	}
	if out, err = run("alarm", "storm"); err != nil || !strings.Contains(out, "ordinary backlog") || !strings.Contains(out, "STORM") {
		t.Fatalf("storm: %v\n%s", err, out)
	}
	sent := caller.Sent()
	for _, args := range [][]string{
		{"alarm", "instances", "--state", "burning"},
		{"alarm", "instances", "extra"},
		{"alarm", "ack", "not an id!"},
		{"alarm", "ack"},
		{"alarm", "silence", "--comment", "no target"},
		{"alarm", "silence", "--device", "d1", "--comment", "no"},
		{"alarm", "silence", "--device", "d1", "--comment", "too long", "--for", "800h"},
		{"alarm", "replay", "abc"},
		{"alarm", "replay", "0"},
		{"alarm", "nonsense"},
	} {
		if _, err := run(args...); err == nil {
			t.Errorf("%s: no error", strings.Join(args, " "))
		}
	}
	if caller.Sent() != sent {
		t.Fatalf("bad input sent %d requests", caller.Sent()-sent)
	}
}
