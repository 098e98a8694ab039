package alarm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelwork/keel/internal/browsertest"
	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/server/auth"
)

// TestAlarmConsoleInBrowser drives Chromium through Keel's real server
// hosting the module on PostgreSQL during a simulated storm: the live
// board shows the storm and the alarms by severity, an operator opens a
// severe instance (history, notices, evidence) and acknowledges it.
func TestAlarmConsoleInBrowser(t *testing.T) {
	t.Parallel()
	e := browsertest.PostgresEnv(t, Lines)
	// The module reads the real time here, as the server hosting it does.
	e.Clock.Set(time.Now().UTC())
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

	srv := browsertest.ServeEnv(t, e, r.c, r.m)
	base := srv.Base
	br := srv.Session("ops-zhao", auth.RoleOperator, 240*time.Second)
	br.Do("open the board", chromedp.Navigate(base+"/alarm"), chromedp.WaitVisible(chromedp.CSS("#severe")), br.Shot("alarm-board"))
	br.MustSee("storm", "#storm-state", "告警风暴进行中", "普通积压")
	br.MustSee("severe alarms", "#severe", sev.ID, devs[0], "严重", "告警中")
	br.MustSee("minor alarms", "#minor", devs[1], "一般", "告警中")
	br.Do("open the severe instance",
		chromedp.Click(chromedp.CSS(`#severe a[href="/alarm/instances/`+sev.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#history")), br.Shot("alarm-instance"))
	br.MustSee("instance", "#instance", devs[0], "temp-high", "告警中", "严重")
	br.MustSee("history", "#history", "正常", "告警中", "超过阈值", "v1")
	br.MustSee("notices", "#notices", "触发", "已送达")
	br.MustSee("evidence", "#evidence", "133")
	br.Do("acknowledge",
		chromedp.SetValue(chromedp.CSS("#comment"), "现场已派人处理"),
		chromedp.Click(chromedp.CSS(`#ack button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#acked")), br.Shot("alarm-acked"))
	br.MustSee("acknowledged", "#instance", "已确认", "ops-zhao", "现场已派人处理")
	br.Do("storm panel", chromedp.Navigate(base+"/alarm/storm"), chromedp.WaitVisible(chromedp.CSS("#watermarks")), br.Shot("alarm-storm"))
	br.MustSee("storm panel", "#storms", "进行中")
	// The module's own audit log reads in words in both languages, the
	// stored action only in the hover title.
	br.MustSee("alarm audit", "#alarm-audit", "确认告警", "进入告警风暴", "普通积压", "令牌 ops-zhao")
	if text := br.Text("alarm audit", "#alarm-audit"); strings.Contains(text, "storm_open") || strings.Contains(text, "system:alarm") {
		t.Errorf("the alarm audit log shows a raw value:\n%s", text)
	}
	br.Do("storm panel in English", chromedp.Navigate(base+"/?lang=en"), chromedp.WaitVisible(chromedp.CSS("header nav")),
		chromedp.Navigate(base+"/alarm/storm"), chromedp.WaitVisible(chromedp.CSS("#alarm-audit")), br.Shot("alarm-storm-en"))
	br.MustSee("alarm audit (en)", "#alarm-audit", "Acknowledge an alarm", "A storm began", "ordinary backlog", "above the storm water")
	if text := br.Text("alarm audit (en)", "#alarm-audit"); strings.Contains(text, "storm_open") || strings.Contains(text, "system:alarm") {
		t.Errorf("the alarm audit log shows a raw value:\n%s", text)
	}
	br.CheckConsole()
	if i, _ := r.m.InstanceByID(ctx, sev.ID); i.State != StAcked || !strings.Contains(i.AckedBy, "ops-zhao") {
		t.Fatalf("after the ack: %+v", i)
	}
}
