package tracking

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/module/moduletest"
	"github.com/keelwork/keel/modules/tracking/domain"
	"github.com/keelwork/keel/modules/tracking/ingest"
)

// TestTrackingQueryClassification: a 429 is waited out for its
// Retry-After (not counted as the carrier failing); a refused API key
// (authentication) goes to manual at once, no retries.
func TestTrackingQueryClassification(t *testing.T) {
	runBoth(t, testQueryClassification, testQueryClassification)
}

func testQueryClassification[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	c := domain.DemoCarriers()[2]
	s := simCarrier(t, &c)
	s.AddParcel(domainJourney(&c, "CL0001")...)
	s.Force429(1)
	in := startInstance(t, e, "classify", []domain.Carrier{c})
	cc, _ := in.m.carrier(c.Code)
	if _, err := in.client.InsertMany(ctx, []keelInsert{ingest.RealtimeJob(cc, "CL0001", "rt-CL0001")}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	moduletest.WaitFor(t, 15*time.Second, "the query after its 429", func() bool { return s.Stats().PerShare["realtime"] == 1 })
	if took := time.Since(start); took < time.Second {
		t.Fatalf("retried %s after a 429 with Retry-After: 1", took)
	}
	moduletest.WaitFor(t, 10*time.Second, "the realtime job to complete", func() bool {
		return e.Count(t, "SELECT count(*) FROM keel_job WHERE kind = 'tracking.realtime' AND state = 'completed'") == 1
	})
	// Authentication refused: manual, one attempt.
	bad := *cc
	bad.APIKey = "wrong"
	in.m.workers.Clients[c.Code].Carrier = &bad
	if _, err := in.client.InsertMany(ctx, []keelInsert{ingest.RealtimeJob(cc, "CL0001", "rt-CL0001-b")}); err != nil {
		t.Fatal(err)
	}
	moduletest.WaitFor(t, 15*time.Second, "the refused query to reach manual", func() bool {
		return e.Count(t, "SELECT count(*) FROM keel_job WHERE kind = 'tracking.realtime' AND state = 'manual' AND attempt = 1") == 1
	})
}

func domainJourney(c *domain.Carrier, wb string) []simEvent {
	return simJourney(c, wb, 3)
}
