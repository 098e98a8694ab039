package keelsqlite

import (
	"context"
	"testing"
	"time"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// BenchmarkCycle100 inserts, claims and completes 100 jobs per iteration,
// reporting the wall time of each step.
func BenchmarkCycle100(b *testing.B) {
	ctx := context.Background()
	d := openTest(b)
	ex := d.Executor()
	params := make([]*keeldriver.JobInsertParams, 100)
	for i := range params {
		params[i] = &keeldriver.JobInsertParams{Kind: "k", Queue: "q"}
	}
	var ins, cl, fin time.Duration
	for b.Loop() {
		s := time.Now()
		if _, err := ex.JobInsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
		ins += time.Since(s)
		s = time.Now()
		jobs, err := ex.JobClaim(ctx, &keeldriver.JobClaimParams{Queue: "q", Owner: "w", Max: 100, LeaseDuration: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		cl += time.Since(s)
		s = time.Now()
		f := make([]*keeldriver.JobFinishParams, len(jobs))
		for i, j := range jobs {
			f[i] = &keeldriver.JobFinishParams{ID: j.ID, Fence: j.Fence, State: keeltype.JobStateCompleted}
		}
		if _, err := ex.JobFinishMany(ctx, f); err != nil {
			b.Fatal(err)
		}
		fin += time.Since(s)
	}
	b.ReportMetric(float64(ins.Microseconds())/float64(b.N), "insert-us")
	b.ReportMetric(float64(cl.Microseconds())/float64(b.N), "claim-us")
	b.ReportMetric(float64(fin.Microseconds())/float64(b.N), "finish-us")
}
