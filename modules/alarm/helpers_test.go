package alarm

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
)

var (
	_ module.Module[pgx.Tx]  = (*Module[pgx.Tx])(nil)
	_ module.Module[*sql.Tx] = (*Module[*sql.Tx])(nil)
	_ module.Grouper         = (*Module[pgx.Tx])(nil)
	_ module.Homer           = (*Module[pgx.Tx])(nil)
	_ module.Searcher        = (*Module[pgx.Tx])(nil)
)

// receiver is a real HTTP webhook receiver counting what it received.
type receiver struct {
	srv    *httptest.Server
	fail   atomic.Bool
	mu     sync.Mutex
	byKey  map[string]int
	bodies []NoticeBody
	at     map[string]time.Time
	hits   atomic.Int64
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{byKey: map[string]int{}, at: map[string]time.Time{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		if r.fail.Load() {
			http.Error(w, "channel down", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(req.Body)
		var nb NoticeBody
		if err := json.Unmarshal(b, &nb); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.byKey[nb.Key]++
		if r.byKey[nb.Key] == 1 {
			r.bodies = append(r.bodies, nb)
			r.at[nb.Key] = time.Now()
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count(key string) int { r.mu.Lock(); defer r.mu.Unlock(); return r.byKey[key] }

func (r *receiver) received(kind string) []NoticeBody {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []NoticeBody
	for _, b := range r.bodies {
		if kind == "" || b.Kind == kind {
			out = append(out, b)
		}
	}
	return out
}

func (r *receiver) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.byKey {
		n += c - 1
	}
	return n
}

type rig[TTx any] struct {
	t    testing.TB
	e    *moduletest.Env[TTx]
	m    *Module[TTx]
	hook *receiver
	c    *keel.Client[TTx]
}

// testSettings: no MQTT (tests ingest through Submit unless they start a
// consumer), short windows off by default (the clock is the test's).
func start[TTx any](t testing.TB, e *moduletest.Env[TTx], settings map[string]string) *rig[TTx] {
	t.Helper()
	s := map[string]string{"alarm.pool_size": "6", "alarm.reserved_conns": "2"}
	for k, v := range settings {
		s[k] = v
	}
	h := e.Host(s)
	if s["test.real_clock"] != "" {
		delete(h.Settings, "test.real_clock")
		h.Clock = nil
	}
	m, err := New(h)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	hook := newReceiver(t)
	m.SetWebhookURL(hook.srv.URL)
	cfg := &keel.Config{FetchPollInterval: 250 * time.Millisecond, RetryPolicy: &keel.JitterRetryPolicy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}}
	if err := m.Configure(cfg); err != nil {
		t.Fatalf("configure: %v", err)
	}
	c := e.Run(t, cfg, m)
	return &rig[TTx]{t: t, e: e, m: m, hook: hook, c: c}
}

func (r *rig[TTx]) devices(ids ...string) {
	r.t.Helper()
	for _, id := range ids {
		if err := r.m.RegisterDevice(context.Background(), id, "", "gw1"); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *rig[TTx]) send(dev, metric string, v float64, boot, seq int64) error {
	s := Sample{Gateway: "gw1", Device: dev, Metric: metric, Value: v, Boot: boot, Seq: seq, DeviceAt: r.e.Clock.Now()}
	return r.m.Ingest(context.Background(), Topic("gw1", dev), Encode(s))
}

func (r *rig[TTx]) mustSend(dev, metric string, v float64, boot, seq int64) {
	r.t.Helper()
	if err := r.send(dev, metric, v, boot, seq); err != nil {
		r.t.Fatalf("send %s %s=%v #%d/%d: %v", dev, metric, v, boot, seq, err)
	}
}

// settle waits until the ordinary backlog is evaluated.
func (r *rig[TTx]) settle() {
	r.t.Helper()
	moduletest.WaitFor(r.t, 60*time.Second, "the ordinary backlog evaluated", func() bool {
		return r.count("SELECT count(*) FROM alarm_telemetry WHERE evaluated = false") == 0
	})
}

// count runs a counting query; on SQLite its boolean literals are the
// integers the columns hold, as the module's partial indexes name them.
func (r *rig[TTx]) count(q string, args ...any) int64 {
	r.t.Helper()
	if r.e.Name == "sqlite" {
		q = strings.NewReplacer("= false", "= 0", "= true", "= 1").Replace(q)
	}
	return r.e.Count(r.t, q, args...)
}

func (r *rig[TTx]) instances(device string) []*Instance {
	r.t.Helper()
	l, err := r.m.Instances(context.Background(), "", device, "", 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}
