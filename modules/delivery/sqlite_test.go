package delivery

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// TestSQLite runs the module on embedded SQLite, as `keel dev` does: a
// CMPP push acknowledged by a gocmpp customer, an HTTP push, and a requeue
// task from preview to completion.
func TestSQLite(t *testing.T) {
	t.Parallel()
	d, _ := testdb.OpenSQLite(t, &testdb.Options{Lines: Lines})
	db := keelsql.SQLite(d.DB())
	m, err := New(&module.Host[*sql.Tx]{DB: db, Logger: testLogger(), Settings: testSettings()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engineConfig()
	if err := m.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := keel.NewClient(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Stop(ctx)
		_ = c.StopAndCancel(ctx)
	})
	hc := newHTTPCustomer(t, "secret-sh1", ackAll)
	ent, err := m.CreateEnterprise(ctx, "Lite")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name, acct string, p Protocol, url string) *Application {
		a, err := m.CreateApplication(ctx, NewApplication{EnterpriseID: ent, Name: name, Account: acct, Secret: "secret-" + acct,
			Protocol: p, ReportEnabled: true, MOEnabled: true, PushURL: url, MOCode: "1069" + acct, Rate: 100})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ca := mk("lite-cmpp", "sc1", ProtoCMPP30, "")
	ha := mk("lite-http", "sh1", ProtoHTTP, hc.srv.URL)
	cust, err := dialCustomer(m.Addr(), ca.Account, ca.Secret, gocmpp.V30, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cust.Close() })
	var ids []int64
	for k, a := range []*Application{ca, ha, ca, ha} {
		id, _, err := m.createRecord(ctx, &NewRecord{Kind: KindMO, AppID: a.ID, EnterpriseID: ent,
			MsgID: strconv.Itoa(9000 + k), Phone: "1380000000" + strconv.Itoa(k), UpstreamKey: "lite:" + strconv.Itoa(k),
			Payload: &MOPayload{DestID: a.MOCode, Content: []byte("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waitFor(t, 20*time.Second, "every push to be acknowledged", func() bool {
		for _, id := range ids {
			if r, err := m.st.record(ctx, id); err != nil || r.Status != StatusDelivered {
				return false
			}
		}
		return true
	})
	pv, err := m.PreviewTask(alice(), Filter{EnterpriseID: ent, Status: StatusDelivered})
	if err != nil || pv.Eligible != 4 || pv.Delivered != 4 {
		t.Fatalf("preview: %v %+v", err, pv)
	}
	task, err := m.CreateTask(alice(), CreateTaskRequest{Token: pv.Token, Reason: "lite replay", Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	// The token makes one task on SQLite too.
	if again, created, err := m.CreateTaskOnce(alice(), CreateTaskRequest{Token: pv.Token, Reason: "lite replay", Rate: 50}); err != nil || created || again.ID != task.ID {
		t.Fatalf("the token again: %v created=%v", err, created)
	}
	waitFor(t, 20*time.Second, "the task to complete", func() bool {
		b, err := c.BatchGet(ctx, task.ID)
		return err == nil && b.State == keeltype.BatchCompleted && b.Counts[keeltype.OutcomeSuccess] == 4
	})
	if got := len(cust.Received()); got != 4 {
		t.Fatalf("the CMPP customer got %d DELIVERs, want 4 (2 pushes, 2 re-deliveries)", got)
	}
	if got := len(hc.received()); got != 4 {
		t.Fatalf("the HTTP customer got %d items, want 4", got)
	}
}
