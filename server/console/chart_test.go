package console

import (
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/module"
)

// TestChartCanBeRead: a chart has round y ticks up to above its highest
// value, its unit, time ticks in the console's zone with the zone named,
// one hover value per sample (time, zone, value and unit) and the sampling
// interval in words.
func TestChartCanBeRead(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	times := []time.Time{at, at.Add(10 * time.Second), at.Add(20 * time.Second)}
	out := string(drawChart(chartSpec{Lang: langZH, Label: "积压", Unit: "单位：条", Times: times,
		Series: []series{{Class: "s3", V: []float64{0, 3, 7}}}, Every: 10 * time.Second}))
	for _, want := range []string{`>0</text>`, `>2</text>`, `>8</text>`, `单位：条`, `12:00:00`, `12:00:20`,
		`时间（北京时间 UTC+8）`, `<title>2026-12-01 12:00:10 UTC+8 · 3 单位：条</title>`, `每 10 秒采样一次`, `1 小时`} {
		if !strings.Contains(out, want) {
			t.Errorf("chart lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "<title>"); n != 3 {
		t.Errorf("%d hover values, want one per sample", n)
	}
	if strings.Contains(out, `>10</text>`) {
		t.Errorf("the y axis goes past the next round tick:\n%s", out)
	}
	if got := string(drawChart(chartSpec{Lang: langEN, Times: times[:1]})); !strings.Contains(got, "Sampling") {
		t.Errorf("one sample: %s", got)
	}
	for d, want := range map[time.Duration]string{300 * time.Millisecond: "300 ms", 10 * time.Second: "10 s",
		90 * time.Second: "1.5 min", time.Hour: "1 h"} {
		if got := durWords(langEN, d); got != want {
			t.Errorf("durWords(%s) = %q, want %q", d, got, want)
		}
	}
}

// testWeb is a module's console surface with only what navigation reads.
type testWeb struct {
	name  string
	nav   []module.NavItem
	group *module.Group
}

func (w testWeb) Name() string           { return w.name }
func (w testWeb) Routes() []module.Route { return nil }
func (w testWeb) Pages() []module.Page   { return nil }
func (w testWeb) Nav() []module.NavItem  { return w.nav }
func (g grouped) Group() module.Group    { return *g.group }

type grouped struct{ testWeb }

// TestNavGroups: the engine's group comes first with the events pages
// under one entry; modules follow in their declared order, one without a
// group after them under its name, and one with no pages has no group.
func TestNavGroups(t *testing.T) {
	t.Parallel()
	mods := []module.Web{
		testWeb{name: "plain", nav: []module.NavItem{{Path: "/plain", ZH: "普通", EN: "Plain"}}},
		grouped{testWeb{name: "late", nav: []module.NavItem{{Path: "/late"}}, group: &module.Group{ZH: "后", EN: "Late", Order: 50}}},
		testWeb{name: eventsWeb, nav: []module.NavItem{{Path: "/events"}, {Path: "/recon/runs"}}},
		grouped{testWeb{name: "early", nav: []module.NavItem{{Path: "/early"}}, group: &module.Group{ZH: "先", EN: "Early", Order: 5}}},
		testWeb{name: "empty"},
	}
	gs := buildNav(mods)
	var keys []string
	for _, g := range gs {
		keys = append(keys, g.Key)
	}
	if strings.Join(keys, ",") != "engine,early,late,plain" {
		t.Fatalf("groups %v", keys)
	}
	var ev *navEntry
	for i, it := range gs[0].Items {
		if len(it.Children) > 0 {
			ev = &gs[0].Items[i]
		}
	}
	if ev == nil || ev.ZH != "事件与对账" || len(ev.Children) != 2 || !ev.On("/recon/runs") || ev.On("/jobs") {
		t.Fatalf("engine items %+v", gs[0].Items)
	}
	if gs[3].Home != "/plain" || gs[3].Name(langEN) != "plain" {
		t.Fatalf("a module without a group or home: %+v", gs[3])
	}
}
