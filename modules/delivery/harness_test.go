package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"
	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/delivery/sim"
)

var testSigningKey = []byte("delivery test signing key 0123456789")

func testLogger() *slog.Logger {
	if os.Getenv("DELIVERY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// env is a fresh PostgreSQL schema with the delivery line migrated.
type env[TTx any] struct {
	t      *testing.T
	d      keeldriver.Driver[TTx]
	pg     *keelpgx.Driver // nil on SQLite
	schema string          // PostgreSQL only
	path   string          // SQLite only: the database file
	db     keelsql.DB[TTx]
	ent    int64
	seq    atomic.Int64
}

func newEnv(t *testing.T) *env[pgx.Tx] {
	t.Helper()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: Lines})
	return &env[pgx.Tx]{t: t, d: d, pg: d, schema: schema, db: keelsql.Pgx(d.Pool())}
}

// newSQLiteEnv is a fresh SQLite file with the delivery line migrated.
func newSQLiteEnv(t *testing.T) *env[*sql.Tx] {
	t.Helper()
	d, path := testdb.OpenSQLite(t, &testdb.Options{Lines: Lines})
	return &env[*sql.Tx]{t: t, d: d, path: path, db: keelsql.SQLite(d.DB())}
}

// eachDB runs a test on PostgreSQL and on SQLite, in parallel subtests.
func eachDB(t *testing.T, pg func(*testing.T, *env[pgx.Tx]), lite func(*testing.T, *env[*sql.Tx])) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pg(t, newEnv(t))
	})
	if raceEnabled {
		// See race_on_test.go: `make test` runs these subtests in a step of
		// their own without -race.
		t.Logf("sqlite subtest: run without -race (go test -run '%s/^sqlite$')", t.Name())
		return
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		lite(t, newSQLiteEnv(t))
	})
}

// inst is one Keel instance: an engine client with the delivery module.
type inst[TTx any] struct {
	m *Module[TTx]
	c *keel.Client[TTx]
}

// testSettings are the module settings of tests: a gateway on a free
// port, short deadlines and a fast heartbeat; kv overrides.
func testSettings(kv ...string) map[string]string {
	s := map[string]string{
		"delivery.cmpp_addr": "127.0.0.1:0", "delivery.ack_timeout": "3s", "delivery.heartbeat": "200ms",
		"delivery.connection_wait": "30s", "delivery.http_timeout": "2s", "delivery.ack_inline": "2s",
		"delivery.workers": "50",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		s["delivery."+kv[i]] = kv[i+1]
	}
	return s
}

func engineConfig() *keel.Config {
	return &keel.Config{
		LeaseDuration: 3 * time.Second, FetchPollInterval: 100 * time.Millisecond,
		PromoteInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond, LeaderTTL: time.Second,
		RetryPolicy:            &keel.JitterRetryPolicy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond},
		CompleterFlushInterval: 2 * time.Millisecond, BatchSigningKey: testSigningKey, Logger: testLogger(),
	}
}

// sqliteConfig slows the engine's own polling for SQLite: its one writer
// is shared by every promote, rescue, flush and heartbeat, and the tests'
// millisecond intervals (fine on PostgreSQL) keep it busy enough under
// -race, where modernc's SQLite runs many times slower, that claims time
// out waiting for it.
func sqliteConfig(cfg *keel.Config) {
	cfg.PromoteInterval = 250 * time.Millisecond
	cfg.RescueInterval = 500 * time.Millisecond
	cfg.FetchPollInterval = 250 * time.Millisecond
	cfg.CompleterFlushInterval = 20 * time.Millisecond
}

// sqliteSettings is settings with the presence heartbeat slowed for the
// same reason, unless the test set its own.
func sqliteSettings(settings map[string]string) map[string]string {
	out := make(map[string]string, len(settings))
	for k, v := range settings {
		out[k] = v
	}
	if out["delivery.heartbeat"] == "200ms" {
		out["delivery.heartbeat"] = "500ms"
	}
	return out
}

func (e *env[TTx]) start(settings map[string]string) *inst[TTx] { return e.startHost(settings, false) }

// startDemo starts an instance with Host.Demo set.
func (e *env[TTx]) startDemo(settings map[string]string) *inst[TTx] {
	return e.startHost(settings, true)
}

func (e *env[TTx]) startHost(settings map[string]string, demo bool) *inst[TTx] {
	e.t.Helper()
	if e.db.Dialect() == "sqlite" {
		settings = sqliteSettings(settings)
	}
	m, err := New(&module.Host[TTx]{DB: e.db, Logger: testLogger(), Settings: settings, Demo: demo})
	if err != nil {
		e.t.Fatalf("new module: %v", err)
	}
	cfg := engineConfig()
	if e.db.Dialect() == "sqlite" {
		sqliteConfig(cfg)
	}
	if err := m.Configure(cfg); err != nil {
		e.t.Fatalf("configure: %v", err)
	}
	c, err := keel.NewClient(e.d, cfg)
	if err != nil {
		e.t.Fatalf("client: %v", err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		e.t.Fatalf("start client: %v", err)
	}
	if err := m.Start(ctx, c); err != nil {
		e.t.Fatalf("start module: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Stop(ctx)
		_ = c.StopAndCancel(ctx)
	})
	return &inst[TTx]{m: m, c: c}
}

// insertOnly is a module on an insert-only client (no workers, no
// gateway): previews, tasks and records without anyone executing them.
func (e *env[TTx]) insertOnly() *inst[TTx] {
	e.t.Helper()
	return e.insertOnlyWith(nil)
}

// insertOnlyWith is insertOnly with the engine configuration adjusted.
func (e *env[TTx]) insertOnlyWith(adjust func(*keel.Config)) *inst[TTx] {
	e.t.Helper()
	m, err := New(&module.Host[TTx]{DB: e.db, Logger: testLogger(), Settings: testSettings("cmpp_addr", "off")})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := engineConfig()
	cfg.DisableMaintenance = true
	if adjust != nil {
		adjust(cfg)
	}
	c, err := keel.NewClient(e.d, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := m.client.Bind(c); err != nil {
		e.t.Fatal(err)
	}
	if err := m.refreshApps(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return &inst[TTx]{m: m, c: c}
}

func (e *env[TTx]) enterprise(i *inst[TTx], name string) int64 {
	e.t.Helper()
	id, err := i.m.CreateEnterprise(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// app creates an application of ent; account must be unique.
func (e *env[TTx]) app(i *inst[TTx], ent int64, name, account string, proto Protocol, url string) *Application {
	e.t.Helper()
	a, err := i.m.CreateApplication(context.Background(), NewApplication{EnterpriseID: ent, Name: name,
		Account: account, Secret: "secret-" + account, Protocol: proto, ReportEnabled: true, MOEnabled: true,
		PushURL: url, MOCode: "10690" + strconv.Itoa(int(e.seq.Add(1))), Rate: 1000})
	if err != nil {
		e.t.Fatalf("create application %s: %v", name, err)
	}
	return a
}

// refresh makes every instance see the applications now.
func refresh[TTx any](t *testing.T, is ...*inst[TTx]) {
	t.Helper()
	for _, i := range is {
		if err := i.m.refreshApps(context.Background()); err != nil {
			t.Fatal(err)
		}
		i.m.recomputeKeys()
	}
}

// seed inserts a status report record (with its Submit mapping) in a
// given status and creation time, without a push job.
func (e *env[TTx]) seed(i *inst[TTx], a *Application, st Status, at time.Time, phone string) *Record {
	e.t.Helper()
	ctx := context.Background()
	n := e.seq.Add(1)
	sub := &Submit{AppID: a.ID, MsgID: strconv.FormatUint(uint64(1)<<60|uint64(n), 10), Phones: []string{phone},
		SrcID: "1069", Content: []byte("hi"), WantReport: true}
	if _, err := i.m.st.insertSubmit(ctx, e.db, sub); err != nil {
		e.t.Fatal(err)
	}
	rec := i.m.reportRecord(sub, fmt.Sprintf("up%d", n), "DELIVRD", "2608121200", "2608121201", phone, uint32(n))
	rec.Status, rec.CreatedAt = st, at.UTC().Truncate(time.Microsecond)
	id, _, err := i.m.st.insertRecord(ctx, e.db, rec)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := i.m.st.record(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// seedMO inserts an MO record.
func (e *env[TTx]) seedMO(i *inst[TTx], a *Application, st Status, at time.Time, phone string) *Record {
	e.t.Helper()
	n := e.seq.Add(1)
	id, _, err := i.m.st.insertRecord(context.Background(), e.db, &NewRecord{Kind: KindMO, AppID: a.ID,
		EnterpriseID: a.EnterpriseID, MsgID: strconv.FormatUint(uint64(2)<<60|uint64(n), 10), Phone: phone,
		Payload:     &MOPayload{DestID: a.MOCode, MsgFmt: 0, Content: []byte("TD"), Text: "TD"},
		UpstreamKey: fmt.Sprintf("mo:seed%d", n), Status: st, CreatedAt: at.UTC().Truncate(time.Microsecond)})
	if err != nil {
		e.t.Fatal(err)
	}
	r, _ := i.m.st.record(context.Background(), id)
	return r
}

func (e *env[TTx]) record(i *inst[TTx], id int64) *Record {
	e.t.Helper()
	r, err := i.m.st.record(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	moduletest.WaitFor(t, within, what, cond)
}

func alice() context.Context { return keel.WithActor(context.Background(), "user:alice") }

// createTask previews f as alice and creates the task with req.
func createTask[TTx any](t *testing.T, i *inst[TTx], f Filter, req CreateTaskRequest) *keeltype.BatchRow {
	t.Helper()
	pv, err := i.m.PreviewTask(alice(), f)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	req.Token = pv.Token
	if req.Reason == "" {
		req.Reason = "INC-7 replay after the outage"
	}
	b, err := i.m.CreateTask(alice(), req)
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	return b
}

func waitTask[TTx any](t *testing.T, i *inst[TTx], id int64, within time.Duration, want ...keeltype.BatchState) *keeltype.BatchRow {
	t.Helper()
	var b *keeltype.BatchRow
	waitFor(t, within, fmt.Sprintf("task %d to be %v", id, want), func() bool {
		var err error
		if b, err = i.c.BatchGet(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(want, b.State)
	})
	return b
}

func counts[TTx any](t *testing.T, i *inst[TTx], id int64) map[keeltype.BatchOutcome]int64 {
	t.Helper()
	b, err := i.c.BatchGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return b.Counts
}

// allItems pages through every item of a task.
func allItems[TTx any](t *testing.T, i *inst[TTx], id int64) []*keeltype.JobRow {
	t.Helper()
	var out []*keeltype.JobRow
	p := keel.BatchItemsParams{BatchID: id, Limit: 100}
	for {
		page, err := i.c.BatchItems(context.Background(), &p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < p.Limit {
			return out
		}
		p.AfterSubject = page[len(page)-1].Subject
	}
}

// customer connects a CMPP customer (gocmpp) to an instance's gateway.
func customer[TTx any](t *testing.T, i *inst[TTx], a *Application, policy func(*delivered) ackAction, feed chan *delivered) *customerSim {
	t.Helper()
	ver := gocmpp.V30
	if a.Protocol == ProtoCMPP20 {
		ver = gocmpp.V20
	}
	c, err := dialCustomer(i.m.Addr(), a.Account, a.Secret, ver, policy, feed)
	if err != nil {
		t.Fatalf("customer %s: %v", a.Account, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	waitFor(t, 5*time.Second, "the connection to register", func() bool { return i.m.links.has(a.ID) })
	return c
}

// httpCustomer is a customer's HTTP push endpoint.
type httpCustomer struct {
	srv    *httptest.Server
	secret string
	mu     sync.Mutex
	got    []PushItem
	times  []time.Time
	answer func(items []PushItem) (int, any)
	badSig atomic.Int64
}

func newHTTPCustomer(t *testing.T, secret string, answer func([]PushItem) (int, any)) *httpCustomer {
	h := &httpCustomer{secret: secret, answer: answer}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func ackAll(items []PushItem) (int, any) {
	acks := make([]PushItemAck, len(items))
	zero := int64(0)
	for i, it := range items {
		acks[i] = PushItemAck{ID: it.ID, Code: &zero}
	}
	return 200, PushAck{Code: &zero, Acks: acks}
}

func (h *httpCustomer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if Sign(h.secret, r.Header.Get(HeaderTimestamp), body) != r.Header.Get(HeaderSignature) {
		h.badSig.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var items []PushItem
	if err := json.Unmarshal(body, &items); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.got = append(h.got, items...)
	for range items {
		h.times = append(h.times, time.Now())
	}
	answer := h.answer
	h.mu.Unlock()
	status, resp := answer(items)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

func (h *httpCustomer) received() []PushItem {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]PushItem(nil), h.got...)
}

func (h *httpCustomer) setAnswer(f func([]PushItem) (int, any)) {
	h.mu.Lock()
	h.answer = f
	h.mu.Unlock()
}

type keelInsertOpts = keel.InsertOpts

type gocmppPacker = gocmpp.Packer

func newDeliverResp(ver gocmpp.Type, msgID uint64, result uint32) gocmpp.Packer {
	if ver == gocmpp.V30 {
		return &gocmpp.Cmpp3DeliverRspPkt{MsgId: msgID, Result: result}
	}
	return &gocmpp.Cmpp2DeliverRspPkt{MsgId: msgID, Result: uint8(result)}
}

func outcomeOf(row *keeltype.JobRow) keeltype.BatchOutcome { return keel.BatchOutcomeOf(row) }

func urlq(s string) string { return url.QueryEscape(s) }

// dumpTask logs a task's counters and live items (for failures).
func dumpTask[TTx any](t *testing.T, i *inst[TTx], id int64) {
	t.Helper()
	b, _ := i.c.BatchGet(context.Background(), id)
	t.Logf("task %d %s counts %v", id, b.State, b.Counts)
	for _, it := range allItems(t, i, id) {
		if outcomeOf(it).Live() {
			t.Logf("  item %s %s state=%s wait=%q fence=%d attempt=%d needs_check=%v", it.Subject, outcomeOf(it), it.State, it.WaitReason, it.Fence, it.Attempt, it.NeedsCheck)
		}
	}
}

type pgxTx = pgx.Tx

type keeldriverJobList = keel.JobListParams

func keelNewClient[TTx any](e *env[TTx], cfg *keel.Config) (*keel.Client[TTx], error) {
	return keel.NewClient(e.d, cfg)
}

// The simulators live in package sim; the tests name them as before.
type (
	customerSim = sim.Customer
	delivered   = sim.Delivered
	ackAction   = sim.Ack
)

var (
	dialCustomer      = sim.DialCustomer
	dialQuietCustomer = sim.DialQuietCustomer
	ackOK             = sim.AckOK
)
