package delivery

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/modules/delivery/sim"
)

// The demo (Host.Demo, `keel dev`): an enterprise with three applications
// (CMPP 2.0, CMPP 3.0, HTTP push), the carrier simulator behind the
// platform's upstream link, a customer client per application that
// acknowledges most pushes and sometimes rejects one or stays silent, and
// a submit loop, so that reports and MO messages flow within a minute.

type demoApp struct {
	name, account string
	proto         Protocol
	moCode        string
}

var demoApps = []demoApp{
	{"演示应用-CMPP2.0", "900001", ProtoCMPP20, "1069001"},
	{"演示应用-CMPP3.0", "900002", ProtoCMPP30, "1069002"},
	{"演示应用-HTTP推送", "demo-http", ProtoHTTP, "1069003"},
}

const (
	demoEnterprise = "演示企业"
	demoSecret     = "demo-secret"
	submitEvery    = 2 * time.Second
	moEvery        = 7 * time.Second
)

type demo[TTx any] struct {
	m      *Module[TTx]
	car    *sim.Carrier
	web    *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
	apps   []*Application
}

func (m *Module[TTx]) startDemo(ctx context.Context) error {
	if m.srv == nil {
		return errors.New("the demo needs the CMPP gateway (delivery.cmpp_addr)")
	}
	d := &demo[TTx]{m: m}
	ctx, d.cancel = context.WithCancel(ctx)
	m.demo = d
	web, err := d.startReceiver()
	if err != nil {
		return err
	}
	if err := d.seed(ctx, "http://"+web+"/push"); err != nil {
		return err
	}
	if err := d.startCarrier(ctx); err != nil {
		return err
	}
	for _, a := range d.apps {
		if a.Protocol.CMPP() {
			d.run(func() { d.customer(ctx, a) })
		}
	}
	d.run(func() { d.moLoop(ctx) })
	return nil
}

func (d *demo[TTx]) run(f func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
}

func (d *demo[TTx]) stop() {
	d.cancel()
	if d.car != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.car.Close(ctx)
		cancel()
	}
	if d.web != nil {
		_ = d.web.Close()
	}
	d.wg.Wait()
}

// seed creates the demo enterprise and applications once; the HTTP
// application's URL follows the receiver's port of this run.
func (d *demo[TTx]) seed(ctx context.Context, pushURL string) error {
	m := d.m
	ents, err := m.st.enterprises(ctx)
	if err != nil {
		return err
	}
	var ent int64
	for _, e := range ents {
		if e.Name == demoEnterprise {
			ent = e.ID
		}
	}
	if ent == 0 {
		if ent, err = m.CreateEnterprise(ctx, demoEnterprise); err != nil {
			return err
		}
	}
	for _, da := range demoApps {
		a, ok := m.apps.account(da.account)
		if !ok {
			url := ""
			if da.proto == ProtoHTTP {
				url = pushURL
			}
			a, err = m.CreateApplication(ctx, NewApplication{EnterpriseID: ent, Name: da.name, Account: da.account,
				Secret: demoSecret, Protocol: da.proto, ReportEnabled: true, MOEnabled: true, PushURL: url, MOCode: da.moCode})
		} else if da.proto == ProtoHTTP && a.PushURL != pushURL {
			a, err = m.UpdateApplication(ctx, a.ID, AppChange{PushURL: &pushURL})
		}
		if err != nil {
			return fmt.Errorf("demo application %s: %w", da.name, err)
		}
		d.apps = append(d.apps, a)
	}
	return nil
}

// startCarrier runs the carrier simulator and links the platform to it.
func (d *demo[TTx]) startCarrier(ctx context.Context) error {
	secret := randomHex(8)
	car, err := sim.NewCarrier(sim.CarrierConfig{Addr: "127.0.0.1:0", Account: "keel01", Secret: secret,
		MinDelay: time.Second, MaxDelay: 5 * time.Second, Logger: d.m.log})
	if err != nil {
		return err
	}
	if err := car.Start(ctx); err != nil {
		return err
	}
	d.car = car
	if d.m.up == nil {
		d.m.up = newCarrierLink(d.m, car.Addr(), "keel01", secret)
		d.m.goRun(func() { d.m.up.Run(ctx) })
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// demoPolicy acknowledges 90% of pushes, rejects 5% and ignores 5%.
func demoPolicy(*sim.Delivered) sim.Ack {
	switch n := mathrand(); {
	case n < 5:
		return sim.Ack{Result: 9}
	case n < 10:
		return sim.Ack{Silent: true}
	}
	return sim.Ack{}
}

func mathrand() int { return rand.IntN(100) }

// customer keeps a demo customer connected and submitting.
func (d *demo[TTx]) customer(ctx context.Context, a *Application) {
	ver := gocmpp.V30
	if a.Protocol == ProtoCMPP20 {
		ver = gocmpp.V20
	}
	for ctx.Err() == nil {
		c, err := sim.DialQuietCustomer(d.m.Addr(), a.Account, demoSecret, ver, demoPolicy)
		if err != nil {
			sleep(ctx, 2*time.Second)
			continue
		}
		d.submitLoop(ctx, c, a)
		_ = c.Close()
	}
}

func (d *demo[TTx]) submitLoop(ctx context.Context, c *sim.Customer, a *Application) {
	t := time.NewTicker(submitEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.Done():
			return
		case <-t.C:
			phone := fmt.Sprintf("138%08d", rand.IntN(100000000))
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := c.Submit(sctx, a.MOCode, phone, "【演示】您的验证码是 "+strconv.Itoa(1000+rand.IntN(9000)))
			cancel()
			if err != nil {
				d.m.log.Debug("delivery demo: submit", "app", a.Name, "err", err)
			}
			d.submitHTTP(ctx)
		}
	}
}

// submitHTTP submits on behalf of the HTTP application (as its HTTP send
// API would), so that its reports flow too.
func (d *demo[TTx]) submitHTTP(ctx context.Context) {
	var app *Application
	for _, a := range d.apps {
		if a.Protocol == ProtoHTTP {
			app = a
		}
	}
	if app == nil || d.m.srv == nil {
		return
	}
	sub := &Submit{AppID: app.ID, MsgID: strconv.FormatUint(uint64(d.m.srv.NewMsgID()), 10),
		Phones: []string{fmt.Sprintf("139%08d", rand.IntN(100000000))}, SrcID: app.MOCode, Content: []byte("demo"), WantReport: true}
	if _, err := d.m.st.insertSubmit(ctx, d.m.st.db, sub); err != nil {
		return
	}
	_, _ = d.m.client.Load().Insert(ctx, ForwardArgs{AppID: app.ID, MsgID: sub.MsgID},
		&keel.InsertOpts{Queue: QueueAux, IdempotencyKey: "forward:" + itoa(app.ID) + ":" + sub.MsgID})
}

// moLoop has handsets reply to the applications' long numbers.
func (d *demo[TTx]) moLoop(ctx context.Context) {
	words := []string{"TD", "你好", "收到，谢谢", "1", "退订"}
	for ctx.Err() == nil {
		sleep(ctx, moEvery)
		a := d.apps[rand.IntN(len(d.apps))]
		_ = d.car.SendMO(a.MOCode+strconv.Itoa(rand.IntN(10)), fmt.Sprintf("137%08d", rand.IntN(100000000)), words[rand.IntN(len(words))])
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// startReceiver runs the demo HTTP customer: it checks the signature and
// acknowledges 90% of items, rejects 5%, and answers 503 to 5% of pushes.
func (d *demo[TTx]) startReceiver() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /push", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if Sign(demoSecret, r.Header.Get(HeaderTimestamp), body) != r.Header.Get(HeaderSignature) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if mathrand() < 5 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var items []PushItem
		_ = json.Unmarshal(body, &items)
		zero := int64(0)
		acks := make([]PushItemAck, len(items))
		for k, it := range items {
			code := int64(0)
			if mathrand() < 5 {
				code = 9
			}
			acks[k] = PushItemAck{ID: it.ID, Code: &code}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(PushAck{Code: &zero, Acks: acks})
	})
	d.web = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = d.web.Serve(ln) }()
	return ln.Addr().String(), nil
}
