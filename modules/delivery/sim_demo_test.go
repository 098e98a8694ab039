package delivery

import (
	"context"
	"testing"
	"time"
)

// TestDemo runs the module as `keel dev` does (Host.Demo): within seconds
// the demo's customers submit, the carrier reports, and status reports
// reach the three demo applications (two over CMPP, one over HTTP).
func TestDemo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	i := e.startDemo(testSettings())
	waitFor(t, 40*time.Second, "reports and MO delivered to every demo application", func() bool {
		page, err := i.m.Records(context.Background(), "zh", Filter{Status: StatusDelivered}, 1, 50)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range page.Items {
			seen[r.Account+"/"+string(r.Kind)] = true
		}
		return seen["900001/report"] && seen["900002/report"] && seen["demo-http/report"]
	})
	apps, err := i.m.AppsView(context.Background())
	if err != nil || len(apps.Enterprises) != 1 || len(apps.Enterprises[0].Apps) != 3 {
		t.Fatalf("demo data: %v %+v", err, apps)
	}
}
