package keel_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

type countArgs struct{}

func (countArgs) Kind() string { return "test.count" }

type countWorker struct{ n *atomic.Int64 }

func (w countWorker) Work(context.Context, *keel.Job[countArgs]) error {
	w.n.Add(1)
	return nil
}

// TestLimitedKeysRefetchWhenSlotsFree: jobs of limited keys are claimed
// only into free worker slots, so a backlog they leave behind must be
// fetched when slots free, not at the next poll. With an hourly poll, the
// drain finishing proves it: a limit whose tokens never bind (huge burst)
// and a concurrency limit both drain, and neither claims beyond its limit.
func TestLimitedKeysRefetchWhenSlotsFree(t *testing.T) {
	both(t, testLimitedKeysRefetch[pgx.Tx], testLimitedKeysRefetch[*sql.Tx])
}

func testLimitedKeysRefetch[TTx any](t *testing.T, d keeldriver.Driver[TTx]) {
	for _, lim := range []*keeltype.FlowLimit{
		{Pattern: "burst:*", Rate: 1e6, Burst: 1e6},
		{Pattern: "conc:*", MaxRunning: 2},
	} {
		prefix := lim.Pattern[:len(lim.Pattern)-1]
		t.Run(prefix, func(t *testing.T) {
			ctx := context.Background()
			var n atomic.Int64
			workers := keel.NewWorkers()
			keel.AddWorker(workers, countWorker{&n})
			cfg := fastConfig(workers)
			cfg.FetchPollInterval = time.Hour
			cfg.Queues = map[string]keel.QueueConfig{prefix: {MaxWorkers: 4}}
			ins := startClient(t, d, &keel.Config{})
			if _, err := ins.FlowLimitSet(ctx, lim, "test"); err != nil {
				t.Fatal(err)
			}
			const total = 120
			var params []keel.InsertParams
			for i := range total {
				params = append(params, keel.InsertParams{Args: countArgs{},
					Opts: &keel.InsertOpts{Queue: prefix, FlowKey: fmt.Sprintf("%s%d", prefix, i%5)}})
			}
			if _, err := ins.InsertMany(ctx, params); err != nil {
				t.Fatal(err)
			}
			startClient(t, d, cfg)
			waitFor(t, 60*time.Second, fmt.Sprintf("%d jobs of %s to run", total, prefix), func() bool { return n.Load() == total })
		})
	}
}
