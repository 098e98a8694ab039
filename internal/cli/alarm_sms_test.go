package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cmpputils "github.com/bigwhite/gocmpp/utils"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/alarm"
	"github.com/keelwork/keel/modules/delivery"
	"github.com/keelwork/keel/modules/delivery/cmpp"
)

// smsCarrier is the carrier's side of the SMS platform's upstream link: a
// real CMPP 3.0 server counting the SUBMITs that reach it (what the
// handsets would get).
type smsCarrier struct {
	srv *cmpp.Server
	mu  sync.Mutex
	got []carrierSubmit
}

type carrierSubmit struct {
	phones []string
	text   string
}

func (c *smsCarrier) Connected(*cmpp.Conn)                              {}
func (c *smsCarrier) Disconnected(*cmpp.Conn, error)                    {}
func (c *smsCarrier) DeliverResp(*cmpp.Conn, uint32, *cmpp.DeliverResp) {}
func (c *smsCarrier) Submit(_ context.Context, _ *cmpp.Conn, _ cmpp.MsgID, s *cmpp.Submit) uint32 {
	text := string(s.Content)
	if s.MsgFmt == cmpp.FmtUCS2 {
		text, _ = cmpputils.Ucs2ToUtf8(text)
	}
	c.mu.Lock()
	c.got = append(c.got, carrierSubmit{phones: s.DestTerminalIDs, text: text})
	c.mu.Unlock()
	return cmpp.ResultOK
}

func (c *smsCarrier) received() []carrierSubmit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]carrierSubmit(nil), c.got...)
}

func startCarrier(t *testing.T) *smsCarrier {
	c := &smsCarrier{}
	srv, err := cmpp.NewServer(cmpp.Config{Addr: "127.0.0.1:0", GatewayID: 77, Handler: c, Logger: moduletest.Quiet(),
		Authenticate: func(_ context.Context, src string) (*cmpp.Account, error) {
			if src != "keel01" {
				return nil, nil
			}
			return &cmpp.Account{AppID: src, Secret: "carrier-secret"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.srv = srv
	t.Cleanup(func() {
		cancel()
		sctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Close(sctx)
	})
	return c
}

func alarmAndDeliveryLines(dialect string) []keelmigrate.Line {
	return append(delivery.Lines(dialect), alarm.Lines(dialect)...)
}

// TestAlarmSMSThroughDelivery: where the delivery module (the SMS
// platform) is installed, a severe alarm's firing and recovered notices
// also reach the on-call phones by SMS, sent as the platform's customer
// application over its real upstream CMPP link to the carrier, once each;
// where it is not, the SMS channel is not offered (and the console says
// so) and no SMS notice is made.
func TestAlarmSMSThroughDelivery(t *testing.T) {
	moduletest.Each(t, alarmAndDeliveryLines, testAlarmSMS, testAlarmSMS)
}

func testAlarmSMS[TTx any](t *testing.T, e *moduletest.Env[TTx]) {
	ctx := context.Background()
	carrier := startCarrier(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hook.Close()
	services := module.NewServices()
	dh := e.Host(map[string]string{"delivery.cmpp_addr": "127.0.0.1:0", "delivery.upstream_addr": carrier.srv.Addr().String(),
		"delivery.upstream_account": "keel01", "delivery.upstream_secret": "carrier-secret"})
	dh.Clock = nil
	dh.Services = services
	dm, err := delivery.New(dh)
	if err != nil {
		t.Fatal(err)
	}
	ah := e.Host(map[string]string{"alarm.sms_to": "13800000001,13800000002", "alarm.sms_account": "alm001",
		"alarm.pool_size": "6", "alarm.reserved_conns": "2"})
	ah.Clock = nil
	ah.Services = services
	am, err := alarm.New(ah)
	if err != nil {
		t.Fatal(err)
	}
	am.SetWebhookURL(hook.URL)
	cfg := &keel.Config{FetchPollInterval: 250 * time.Millisecond, RetryPolicy: &keel.JitterRetryPolicy{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}}
	if err := dm.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := am.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	c := e.Client(t, cfg)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dm.Start(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := am.Start(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = am.Stop(sctx)
		_ = dm.Stop(sctx)
		_ = c.Stop(sctx)
	})
	ent, err := dm.CreateEnterprise(ctx, "值班中心")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dm.CreateApplication(ctx, delivery.NewApplication{EnterpriseID: ent, Name: "告警短信", Account: "alm001", Secret: "s3cret",
		Protocol: delivery.ProtoCMPP30, MOCode: "10690001"}); err != nil {
		t.Fatal(err)
	}
	if on, why := am.SMSChannel(); !on || !strings.Contains(why[1], "delivery") {
		t.Fatalf("SMS channel with the delivery module installed: %v %q", on, why)
	}
	if err := am.RegisterDevice(ctx, "boiler7", "", "gw1"); err != nil {
		t.Fatal(err)
	}
	send := func(v float64, seq int64) {
		t.Helper()
		s := alarm.Sample{Gateway: "gw1", Device: "boiler7", Metric: "temp", Value: v, Boot: 1, Seq: seq, DeviceAt: time.Now()}
		if err := am.Ingest(ctx, alarm.Topic("gw1", "boiler7"), alarm.Encode(s)); err != nil {
			t.Fatal(err)
		}
	}
	send(130, 1) // severe at once
	moduletest.WaitFor(t, 60*time.Second, "the firing SMS at the carrier", func() bool { return len(carrier.received()) >= 1 })
	send(20, 2)
	send(20, 3) // recovered (two clear windows)
	moduletest.WaitFor(t, 60*time.Second, "the recovered SMS at the carrier", func() bool { return len(carrier.received()) >= 2 })
	got := carrier.received()
	for i, want := range []string{"触发", "恢复"} {
		s := got[i]
		if strings.Join(s.phones, ",") != "13800000001,13800000002" || !strings.Contains(s.text, want) || !strings.Contains(s.text, "boiler7") {
			t.Fatalf("SMS %d at the carrier: %+v, want the on-call phones and %q about boiler7", i, s, want)
		}
	}
	// Every notice settled (sent), then nothing more reaches the carrier:
	// each SMS once.
	moduletest.WaitFor(t, 60*time.Second, "the SMS notices sent", func() bool {
		l, err := am.Notices(ctx, "sent", "", 100)
		n := 0
		for _, x := range l {
			if x.Channel == alarm.ChannelSMS {
				n++
			}
		}
		return err == nil && n == 2
	})
	if n := len(carrier.received()); n != 2 {
		t.Fatalf("the carrier got %d SMS, want 2 (firing, recovered)", n)
	}

	// Without an SMS platform the channel is not offered.
	bare := e.Host(map[string]string{"alarm.sms_to": "13800000001", "alarm.sms_account": "alm001"})
	bare.Services = module.NewServices()
	bm, err := alarm.New(bare)
	if err != nil {
		t.Fatal(err)
	}
	if on, why := bm.SMSChannel(); on || !strings.Contains(why[0], "未提供") || !strings.Contains(why[1], "not offered") {
		t.Fatalf("SMS channel without the delivery module: %v %q", on, why)
	}
}
