package delivery

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/delivery/cmpp"
	"github.com/keelwork/keel/modules/delivery/sim"
)

// TestUpstreamIngestion runs the whole chain over loopback CMPP: a gocmpp
// customer submits to the gateway; the submit is forwarded (after its
// SUBMIT_RESP was written) to the carrier simulator; the carrier's status
// report comes back through the upstream link, is ingested against the
// Submit mapping and pushed to the customer carrying the Msg_Id the
// customer got; an MO from the carrier is routed by its Dest_Id to the
// application and pushed too. The carrier reports with no delay, so a
// report may beat its mapping and take the ingest retry.
func TestUpstreamIngestion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	car, err := sim.NewCarrier(sim.CarrierConfig{Addr: "127.0.0.1:0", Account: "keel01", Secret: "carrier-secret",
		Mix: map[string]int{cmpp.StatUndeliv: 1}, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := car.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = car.Close(context.Background()) })
	i := e.start(testSettings("upstream_addr", car.Addr(), "upstream_account", "keel01", "upstream_secret", "carrier-secret"))
	ent := e.enterprise(i, "Acme")
	app := e.app(i, ent, "chain", "u001", ProtoCMPP20, "")
	feed := make(chan *delivered, 16)
	cust := customer(t, i, app, nil, feed)
	waitFor(t, 10*time.Second, "the carrier link", func() bool { return i.m.up.Connected() })

	msgID, err := cust.Submit(context.Background(), app.MOCode, "13800001111", "验证码 2468")
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, feed)
	if !got.IsReport || got.Inner != msgID || got.Stat != cmpp.StatUndeliv || got.Dest != "13800001111" || got.Layout != 60 {
		t.Fatalf("report: %+v (submitted %d)", got, msgID)
	}
	sub, err := i.m.st.submitByMsgID(context.Background(), app.ID, strconv.FormatUint(msgID, 10))
	if err != nil || sub.UpstreamMsgID == nil {
		t.Fatalf("mapping: %v %+v", err, sub)
	}
	ids, _ := i.m.st.recordIDsByMsgID(context.Background(), sub.MsgID)
	if len(ids) != 1 {
		t.Fatalf("records of the submit: %v", ids)
	}
	waitFor(t, 5*time.Second, "the record to be delivered", func() bool {
		r := e.record(i, ids[0])
		return r.Status == StatusDelivered && r.SubmitID != nil && *r.SubmitID == sub.ID
	})

	if err := car.SendMO(app.MOCode+"5", "13900002222", "退订"); err != nil {
		t.Fatal(err)
	}
	mo := recv(t, feed)
	if mo.IsReport || mo.Content != "退订" || mo.Dest != "13900002222" {
		t.Fatalf("MO: %+v", mo)
	}
}

func recv(t *testing.T, ch chan *delivered) *delivered {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("nothing reached the customer")
	}
	return nil
}

// TestCarrierSimOutsideDemo: with delivery.carrier_sim an instance runs the
// carrier simulator on its own settings, without the demo, and links its
// upstream to it: a customer's SUBMIT comes back as a status report with
// the configured stat, ingested, recorded and pushed to the customer.
func TestCarrierSimOutsideDemo(t *testing.T) {
	t.Parallel()
	for _, bad := range []map[string]string{
		{"delivery.carrier_sim": "127.0.0.1:0", "delivery.carrier_sim_mix": "DELIVRD:x"},
		{"delivery.carrier_sim": "127.0.0.1:0", "delivery.carrier_sim_delay": "5s-1s"},
		{"delivery.carrier_sim": "127.0.0.1:0", "delivery.carrier_sim_account": "toolongacct"},
	} {
		if _, err := parseSettings(bad); err == nil {
			t.Fatalf("%v was accepted", bad)
		}
	}
	e := newEnv(t)
	i := e.start(testSettings("carrier_sim", "127.0.0.1:0", "carrier_sim_delay", "100ms-300ms",
		"carrier_sim_mix", "EXPIRED:1"))
	ent := e.enterprise(i, "Acme")
	app := e.app(i, ent, "sim", "u002", ProtoCMPP30, "")
	feed := make(chan *delivered, 16)
	cust := customer(t, i, app, nil, feed)
	waitFor(t, 10*time.Second, "the link to the simulator", func() bool { return i.m.up != nil && i.m.up.Connected() })
	msgID, err := cust.Submit(context.Background(), app.MOCode, "13800003333", "hello")
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, feed)
	if !got.IsReport || got.Inner != msgID || got.Stat != cmpp.StatExpired {
		t.Fatalf("report: %+v (submitted %d)", got, msgID)
	}
	ids, _ := i.m.st.recordIDsByMsgID(context.Background(), strconv.FormatUint(msgID, 10))
	if len(ids) != 1 {
		t.Fatalf("records of the submit: %v", ids)
	}
	waitFor(t, 5*time.Second, "the record to be delivered", func() bool { return e.record(i, ids[0]).Status == StatusDelivered })
}
