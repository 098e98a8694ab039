package payment

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelpgx"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keelsqlite"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

// The crash child's environment.
const (
	envCrashRole   = "KEEL_PAYCRASH_ROLE" // "before-publish" or "after-publish"
	envCrashDriver = "KEEL_PAYCRASH_DRIVER"
	envCrashDSN    = "KEEL_PAYCRASH_DSN"
	envCrashConfig = "KEEL_PAYCRASH_CHANNEL" // the Alipay channel.Config as JSON
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envCrashRole); role != "" {
		err := crashChild(role)
		fmt.Fprintf(os.Stderr, "payment crash child: %v\n", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// crashBus stops the process at the relay's first publish: before it (the
// callback's transaction committed, nothing published) or after the bus
// acknowledged it (published, not marked).
type crashBus struct {
	keelevents.Bus
	after bool
	once  sync.Once
}

func (b *crashBus) Publish(ctx context.Context, msgs []keelevents.Message) (int, error) {
	if !b.after {
		b.block()
	}
	n, err := b.Bus.Publish(ctx, msgs)
	if b.after && n > 0 {
		b.block()
	}
	return n, err
}

func (b *crashBus) block() {
	b.once.Do(func() { fmt.Println("BLOCKED") })
	select {} // the parent SIGKILLs us here
}

// wireConfig is the part of an Alipay channel.Config a child needs.
type wireConfig struct {
	Kind                         channel.Kind
	BaseURL, MerchantID, AppID   string
	MerchantKeyPEM, PublicKeyPEM []byte
}

func crashChild(role string) error {
	ctx := context.Background()
	var w wireConfig
	if err := json.Unmarshal([]byte(os.Getenv(envCrashConfig)), &w); err != nil {
		return err
	}
	cfg := channel.Config{Kind: w.Kind, BaseURL: w.BaseURL, MerchantID: w.MerchantID, AppID: w.AppID,
		MerchantKeyPEM: w.MerchantKeyPEM, PublicKeyPEM: w.PublicKeyPEM, HTTPTimeout: time.Second}
	switch os.Getenv(envCrashDriver) {
	case "postgres":
		d, err := keelpgx.Open(ctx, os.Getenv(envCrashDSN), nil)
		if err != nil {
			return err
		}
		return runCrashChild(ctx, role, keelsql.Pgx(d.Pool()), cfg)
	case "sqlite":
		d, err := keelsqlite.Open(os.Getenv(envCrashDSN), nil)
		if err != nil {
			return err
		}
		return runCrashChild(ctx, role, keelsql.SQLite(d.DB()), cfg)
	}
	return fmt.Errorf("unknown driver %q", os.Getenv(envCrashDriver))
}

// runCrashChild is a payment process: the callback ingress and the relay,
// on the parent's database.
func runCrashChild[TTx any](ctx context.Context, role string, db keelsql.DB[TTx], cfg channel.Config) error {
	inner, err := keelevents.NewDatabaseBus(db, &keelevents.DatabaseBusConfig{Logger: moduletest.Quiet()})
	if err != nil {
		return err
	}
	ev, err := keelevents.New(db, &crashBus{Bus: inner, after: role == "after-publish"},
		&keelevents.Config{Partitions: 8, LeaseTTL: 600 * time.Millisecond, StatsInterval: time.Hour, Logger: moduletest.Quiet()})
	if err != nil {
		return err
	}
	ch, err := channel.New(ctx, cfg)
	if err != nil {
		return err
	}
	m, err := New(&module.Host[TTx]{DB: db, Events: ev, Settings: testSettings(nil)},
		WithMerchant(Merchant{Kind: cfg.Kind, MerchantID: cfg.MerchantID, AppID: cfg.AppID, Channel: ch}))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, m.CallbackHandler()) }()
	if err := ev.Start(ctx, nil); err != nil {
		return err
	}
	fmt.Println("READY http://" + ln.Addr().String())
	select {}
}

// TestPaymentOutboxCrash: the process that committed a callback is
// SIGKILLed before its relay published the event, and (another run) after
// the bus took it but before the relay marked it. A new process on the
// same database publishes what was left; the channel's retry of the same
// callback is acknowledged with no second effect; the ledger books one
// entry and the order is paid once.
func TestPaymentOutboxCrash(t *testing.T) {
	for _, role := range []string{"before-publish", "after-publish"} {
		t.Run(role, func(t *testing.T) {
			each(t, func(t *testing.T, e *tenv[pgxTx]) { testOutboxCrash(t, e, role) },
				func(t *testing.T, e *tenv[sqlTx]) { testOutboxCrash(t, e, role) })
		})
	}
}

func testOutboxCrash[TTx any](t *testing.T, e *tenv[TTx], role string) {
	ctx := context.Background()
	sim, err := paysim.Start(ctx, paysim.Options{TimeScale: 3600, ClientTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	cfg := sim.Config(channel.KindAlipay)
	ch, err := channel.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The payment order, written by a process that is not running.
	bus, _ := keelevents.NewDatabaseBus(e.DB, &keelevents.DatabaseBusConfig{Logger: moduletest.Quiet()})
	idle, _ := keelevents.New(e.DB, bus, &keelevents.Config{Partitions: 8, StatsInterval: time.Hour, Logger: moduletest.Quiet()})
	creator, err := New(&module.Host[TTx]{DB: e.DB, Events: idle, Settings: testSettings(nil)},
		WithMerchant(Merchant{Kind: channel.KindAlipay, MerchantID: cfg.MerchantID, AppID: cfg.AppID, Channel: ch}))
	if err != nil {
		t.Fatal(err)
	}
	no := "CRASH" + strings.ReplaceAll(role, "-", "")[:6]
	if _, err := creator.CreatePayment(ctx, NewPayment{PaymentNo: no, OrderID: "O" + no, Channel: "alipay", AmountMinor: 128800, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	sim.Create(channel.KindAlipay, no, 128800, "CNY")
	if err := sim.PayWithoutCallback(channel.KindAlipay, no); err != nil {
		t.Fatal(err)
	}
	h, body, err := sim.Notification(channel.KindAlipay, no)
	if err != nil {
		t.Fatal(err)
	}
	// The child: ingress and relay, killed at its first publish.
	raw, err := json.Marshal(wireConfig{Kind: cfg.Kind, BaseURL: cfg.BaseURL, MerchantID: cfg.MerchantID, AppID: cfg.AppID,
		MerchantKeyPEM: cfg.MerchantKeyPEM, PublicKeyPEM: cfg.PublicKeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashRole+"="+role, envCrashDriver+"="+e.Name, envCrashDSN+"="+e.DSN, envCrashConfig+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	ready, blocked := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.HasPrefix(l, "READY "):
				ready <- strings.TrimPrefix(l, "READY ")
			case l == "BLOCKED":
				close(blocked)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	kill := func() { _ = cmd.Process.Kill(); <-exited }
	t.Cleanup(kill)
	var url string
	select {
	case url = <-ready:
	case <-exited:
		t.Fatal("the child exited")
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not start")
	}
	send := func(base string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+CallbackPath(channel.KindAlipay), strings.NewReader(string(body)))
		req.Header = h.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	if status, reply := send(url); reply != "success" {
		t.Fatalf("the child answered %d %q", status, reply)
	}
	select {
	case <-blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("the child's relay never published")
	}
	kill() // SIGKILL
	if p, err := creator.Payment(ctx, no); err != nil || p.State != PayPaid {
		t.Fatalf("after the crash (%v) the payment is not paid: the callback's commit was lost", err)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE event_key = $1 AND published_at IS NULL", no); n != 1 {
		t.Fatalf("%d unmarked outbox rows, want the one the child left", n)
	}
	// A new process takes over; the channel retries the callback.
	e.start(t, startOpts{noSweep: true, existing: sim})
	if status, reply := send(e.ingress.URL); reply != "success" {
		t.Fatalf("the retried callback got %d %q", status, reply)
	}
	// The child's own consumers run too (the module subscribes them), and
	// one may have taken the delivery in the moment between the publish
	// and the kill: the bus then hands it out again only after its ack
	// wait, so the bound is that wait plus the usual 30 s.
	moduletest.WaitFor(t, keelevents.DefaultAckWait+30*time.Second, "the ledger entry and the order", func() bool {
		o, _ := e.m.Order(ctx, "O"+no)
		return e.Count(t, "SELECT COUNT(*) FROM pay_journal WHERE payment_no = $1", no) == 1 && o != nil && o.State == OrderPaid
	})
	moduletest.WaitFor(t, 30*time.Second, "the outbox row marked", func() bool {
		return e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE event_key = $1 AND published_at IS NULL", no) == 0
	})
	if n := e.Count(t, "SELECT COUNT(*) FROM keel_events_outbox WHERE event_key = $1", no); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	if n := e.Count(t, "SELECT COUNT(*) FROM pay_callback WHERE payment_no = $1 AND outcome = 'applied'", no); n != 1 {
		t.Fatalf("%d applied callbacks", n)
	}
	js, _ := e.m.Journal(ctx, no)
	if len(js) != 1 || js[0].Amount != 128800 {
		t.Fatalf("journal %+v", js)
	}
}
