package payment

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelrecon"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

var testLines = moduletest.Lines(moduletest.EventsLines, keelrecon.Lines, Lines)

// tenv is one test database (the kit's Env) with the events backbone on
// the in-database bus, reconciliation, the module, its callback ingress on
// a loopback server and the channel simulator calling it.
type tenv[TTx any] struct {
	*moduletest.Env[TTx]
	ev      *keelevents.Events[TTx]
	recon   *keelrecon.Recon[TTx]
	m       *Module[TTx]
	client  *keel.Client[TTx]
	sim     *paysim.Sim
	ingress *httptest.Server
}

func newTenv[TTx any](e *moduletest.Env[TTx]) *tenv[TTx] { return &tenv[TTx]{Env: e} }

// each runs a generic test once per database, in parallel.
func each(t *testing.T, pg func(t *testing.T, e *tenv[pgx.Tx]), lite func(t *testing.T, e *tenv[*sql.Tx])) {
	moduletest.Each(t, testLines, moduletest.With(newTenv[pgx.Tx], pg), moduletest.With(newTenv[*sql.Tx], lite))
}

// testSettings compress the channel's day: horizons of seconds, backoffs
// of milliseconds.
func testSettings(extra map[string]string) map[string]string {
	s := map[string]string{
		"payment.time_scale":     "0.001",
		"payment.sweep_every":    "50ms",
		"payment.refund_backoff": "20s", // 20ms scaled
	}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

type startOpts struct {
	settings map[string]string
	approve  map[string]int64
	sim      paysim.Options
	noSweep  bool
	noRelay  bool        // no relay in this process: emitted events stay in the outbox
	existing *paysim.Sim // a simulator already running (its callbacks then go nowhere)
	demo     bool        // keel dev: the module runs its own simulator and demo data
}

// start builds and starts everything.
func (e *tenv[TTx]) start(t testing.TB, o startOpts) {
	t.Helper()
	ctx := context.Background()
	e.ev = e.Events(t, &keelevents.Config{Partitions: 8, LeaseTTL: 2 * time.Second, StatsInterval: time.Hour, DisableRelay: o.noRelay})
	var err error
	var rc *keelrecon.Config
	if o.approve != nil {
		rc = &keelrecon.Config{ApproveAbove: o.approve}
	}
	e.recon, err = keelrecon.New(e.DB, rc)
	if err != nil {
		t.Fatal(err)
	}
	settings := testSettings(o.settings)
	if o.noSweep {
		settings["payment.sweep_every"] = "1h"
	}
	h := &module.Host[TTx]{DB: e.DB, Logger: moduletest.Quiet(), Settings: settings, Recon: e.recon, Events: e.ev, Demo: o.demo}
	e.m, err = New(h)
	if err != nil {
		t.Fatal(err)
	}
	var handler atomic.Pointer[http.Handler]
	e.ingress = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(e.ingress.Close)
	hh := e.m.CallbackHandler()
	handler.Store(&hh)
	so := o.sim
	so.NotifyURL = map[channel.Kind]string{
		channel.KindWeChat: e.ingress.URL + CallbackPath(channel.KindWeChat),
		channel.KindAlipay: e.ingress.URL + CallbackPath(channel.KindAlipay),
	}
	if so.TimeScale == 0 {
		so.TimeScale = 3600
	}
	if so.ClientTimeout == 0 {
		so.ClientTimeout = 2 * time.Second
	}
	if o.demo {
		// the module's own simulator and merchants
	} else if o.existing != nil {
		e.sim = o.existing
	} else {
		e.sim, err = paysim.Start(ctx, so)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.sim.Close() })
	}
	for _, k := range []channel.Kind{channel.KindWeChat, channel.KindAlipay} {
		if o.demo {
			break
		}
		cfg := e.sim.Config(k)
		ch, err := channel.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.m.AddMerchant(Merchant{Kind: k, MerchantID: cfg.MerchantID, AppID: cfg.AppID, Channel: ch})
	}
	cfg := &keel.Config{Logger: moduletest.Quiet(), Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 8}}}
	for _, c := range []interface{ Configure(*keel.Config) error }{e.ev, e.m, e.recon} {
		if err := c.Configure(cfg); err != nil {
			t.Fatal(err)
		}
	}
	e.client = e.Run(t, cfg, e.recon, e.ev, e.m)
}

// pay creates a payment order here and its trade at the channel.
func (e *tenv[TTx]) pay(t testing.TB, kind channel.Kind, no string, amount int64, currency string) *Payment {
	t.Helper()
	p, err := e.m.CreatePayment(context.Background(), NewPayment{PaymentNo: no, OrderID: "O" + no, Channel: string(kind),
		AmountMinor: amount, Currency: currency})
	if err != nil {
		t.Fatalf("creating payment %s: %v", no, err)
	}
	e.sim.Create(kind, no, amount, currency)
	return p
}

func (e *tenv[TTx]) state(t testing.TB, no string) string {
	t.Helper()
	p, err := e.m.Payment(context.Background(), no)
	if err != nil {
		t.Fatal(err)
	}
	return p.State
}

func (e *tenv[TTx]) refundState(t testing.TB, no string) string {
	t.Helper()
	r, err := e.m.Refund(context.Background(), no)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// post sends a callback to the ingress as a channel would; it returns the
// status and the reply body.
func (e *tenv[TTx]) post(t testing.TB, kind channel.Kind, h http.Header, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.ingress.URL+CallbackPath(kind), bytesReader(body))
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	return resp.StatusCode, string(b[:n])
}

type (
	pgxTx = pgx.Tx
	sqlTx = *sql.Tx
)

// start2 builds the module on an events backbone the caller made and
// starts both (benchmarks: the backlog is emitted first).
func (e *tenv[TTx]) start2(t testing.TB, ev *keelevents.Events[TTx]) {
	t.Helper()
	var err error
	e.m, err = New(&module.Host[TTx]{DB: e.DB, Logger: moduletest.Quiet(), Settings: testSettings(map[string]string{"payment.sweep_every": "1h"}), Events: ev})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &keel.Config{Logger: moduletest.Quiet()}
	for _, c := range []interface{ Configure(*keel.Config) error }{ev, e.m} {
		if err := c.Configure(cfg); err != nil {
			t.Fatal(err)
		}
	}
	e.client = e.Run(t, cfg, ev, e.m)
}
