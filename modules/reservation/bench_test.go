package reservation

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// BenchmarkRelease10kOf1M loads 1,000,000 reservations of which 10,000 are
// due, then times releasing all of them with scans run back to back at the
// default page (200) and transaction (20) sizes. ns/op is the release
// alone; the load is excluded. postgres_sync_commit is postgres with
// reservation.async_commit=false.
func BenchmarkRelease10kOf1M(b *testing.B) {
	const total, due = 1_000_000, 10_000
	b.Run("postgres", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			e := newPGEnv(b)
			benchOnce(b, e.db, e.driver, nil, total, due)
		}
	})
	b.Run("postgres_sync_commit", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			e := newPGEnv(b)
			benchOnce(b, e.db, e.driver, map[string]string{"reservation.async_commit": "false"}, total, due)
		}
	})
	b.Run("sqlite", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			e := newSQLiteEnv(b)
			benchOnce(b, e.db, e.driver, nil, total, due)
		}
	})
}

func benchOnce[TTx any](b *testing.B, db keelsql.DB[TTx], d keeldriver.Driver[TTx], settings map[string]string, total, due int) {
	ctx := context.Background()
	client, err := keel.NewClient(d, &keel.Config{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(&module.Host[TTx]{DB: db, Logger: quiet(), Settings: settings, Events: testEvents(b, db)})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.client.Bind(client); err != nil {
		b.Fatal(err)
	}
	loadStart := time.Now()
	if err := m.benchLoad(ctx, total, due); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d reservations in %s", total, time.Since(loadStart).Round(time.Millisecond))
	b.StartTimer()
	start := time.Now()
	released, err := m.releaseAllDue(ctx)
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil || released != due {
		b.Fatalf("released %d of %d: %v", released, due, err)
	}
	b.ReportMetric(elapsed.Seconds(), "s/10k-releases")
	b.ReportMetric(float64(due)/elapsed.Seconds(), "releases/s")
}
