package alarm

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/internal/testdb"
	"github.com/keelwork/keel/keelmigrate"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/server"
	"github.com/keelwork/keel/server/auth"
	"github.com/keelwork/keel/server/migration"

	"github.com/jackc/pgx/v5"
)

// TestAlarmConsoleInBrowser drives Chromium through Keel's real server
// hosting the module on PostgreSQL during a simulated storm: the live
// board shows the storm and the alarms by severity, an operator opens a
// severe instance (history, notices, evidence) and acknowledges it.
func TestAlarmConsoleInBrowser(t *testing.T) {
	t.Parallel()
	d, schema := testdb.OpenPostgres(t, &testdb.Options{Lines: func(dialect string) []keelmigrate.Line {
		return append(migration.Lines(dialect), Lines(dialect)...)
	}})
	e := &moduletest.Env[pgx.Tx]{Name: "postgres", Driver: d, DB: keelsql.Pgx(d.Pool()), Schema: schema, Clock: moduletest.NewClock(time.Now().UTC())}
	r := start(t, e, nil)
	ctx := context.Background()
	var devs []string
	for i := 0; i < 12; i++ {
		devs = append(devs, fmt.Sprintf("gwfault-%02d", i))
	}
	r.devices(devs...)
	r.m.ForcePressure(3)
	if err := r.m.measure(ctx); err != nil {
		t.Fatal(err)
	}
	// The gateway fault: every device over the warn threshold, one severe.
	for seq := int64(1); seq <= 3; seq++ {
		for _, dev := range devs[1:] {
			r.mustSend(dev, "temp", 92, 1, seq)
		}
	}
	r.mustSend(devs[0], "temp", 133, 1, 1)
	r.settle()
	sev := r.instances(devs[0])[0]
	moduletest.WaitFor(t, 30*time.Second, "the severe notice", func() bool { return r.hook.count(sev.ID+":firing:3") == 1 })

	db := stdlib.OpenDBFromPool(d.Pool())
	t.Cleanup(func() { _ = db.Close() })
	store := auth.NewStore(db, "postgres", auth.AuditedTxOf(e.DB, r.c))
	srv, err := server.New(&server.Config{Addr: "127.0.0.1:0", Engine: r.c, Auth: store,
		Logger: slog.New(slog.DiscardHandler), Modules: []module.Web{r.m}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	token, _, err := store.CreateToken(ctx, "ops-zhao", auth.RoleOperator, "test", "browser test fixture")
	if err != nil {
		t.Fatal(err)
	}
	base := srv.URL()
	br := browsertest.New(t, 240*time.Second)
	br.Login(base, token)
	br.Do("open the board", chromedp.Navigate(base+"/alarm"), chromedp.WaitVisible(chromedp.CSS("#severe")), br.Shot("alarm-board"))
	br.MustSee("storm", "#storm-state", "告警风暴进行中", "普通积压")
	br.MustSee("severe alarms", "#severe", sev.ID, devs[0], "严重", "告警中")
	br.MustSee("minor alarms", "#minor", devs[1], "一般", "告警中")
	br.Do("open the severe instance",
		chromedp.Click(chromedp.CSS(`#severe a[href="/alarm/instances/`+sev.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#history")), br.Shot("alarm-instance"))
	br.MustSee("instance", "#instance", devs[0], "temp-high", "告警中", "严重")
	br.MustSee("history", "#history", "正常", "告警中", "v1")
	br.MustSee("notices", "#notices", "触发", "已送达")
	br.MustSee("evidence", "#evidence", "133")
	br.Do("acknowledge",
		chromedp.SetValue(chromedp.CSS("#comment"), "现场已派人处理"),
		chromedp.Click(chromedp.CSS(`#ack button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#acked")), br.Shot("alarm-acked"))
	br.MustSee("acknowledged", "#instance", "已确认", "ops-zhao", "现场已派人处理")
	br.Do("storm panel", chromedp.Navigate(base+"/alarm/storm"), chromedp.WaitVisible(chromedp.CSS("#watermarks")), br.Shot("alarm-storm"))
	br.MustSee("storm panel", "#storms", "进行中")
	br.CheckConsole()
	if i, _ := r.m.InstanceByID(ctx, sev.ID); i.State != StAcked || !strings.Contains(i.AckedBy, "ops-zhao") {
		t.Fatalf("after the ack: %+v", i)
	}
}
