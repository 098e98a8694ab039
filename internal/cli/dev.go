package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelsqlite"
)

// DevOpts are the flags of `keel dev`.
type DevOpts struct {
	DataDir string
	Out     io.Writer
	// Ready, if set, is called once the client runs (tests synchronise on it).
	Ready func()
}

// demoArgs is the demo kind: a delivery to an imaginary counterpart that is
// slow, sometimes fails, and sometimes leaves the result unknown.
type demoArgs struct {
	Order int `json:"order"`
}

func (demoArgs) Kind() string { return "demo.deliver" }

type demoWorker struct{ log *slog.Logger }

func (w *demoWorker) Work(ctx context.Context, job *keel.Job[demoArgs]) error {
	select {
	case <-time.After(time.Duration(20+rand.IntN(200)) * time.Millisecond):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	switch r := rand.IntN(100); {
	case r < 10:
		return errors.New("counterpart busy (retryable)")
	case r < 13:
		return keel.JobUnknown(errors.New("timed out after sending"))
	case r < 15:
		return keel.JobPermanent(errors.New("counterpart rejected the order"))
	}
	return keel.RecordResult(ctx, map[string]string{"confirmation": fmt.Sprintf("C-%d-%d", job.Args.Order, job.Fence)})
}

// Check asks the counterpart whether an unknown delivery arrived.
func (w *demoWorker) Check(ctx context.Context, job *keel.Job[demoArgs]) (keel.CheckResult, error) {
	if rand.IntN(2) == 0 {
		return keel.CheckResult{Decision: keel.CheckCompleted, Result: "confirmed by query"}, nil
	}
	return keel.CheckResult{Decision: keel.CheckRetry}, nil
}

// Dev runs Keel on embedded SQLite with demo work until ctx ends. Running it
// again resumes the same data.
func Dev(ctx context.Context, o *DevOpts) error {
	path := filepath.Join(o.DataDir, "keel.db")
	fmt.Fprintf(o.Out, "keel dev: embedded SQLite at %s\n", path)
	return WithDatabase(ctx, "sqlite:"+path, "", DriverFuncs{
		SQLite: func(ctx context.Context, d *keelsqlite.Driver) error { return devOn(ctx, d, o) },
	})
}

func devOn[TTx any](ctx context.Context, d keeldriver.Driver[TTx], o *DevOpts) error {
	if err := migrateOn(ctx, d, &MigrateOpts{Direction: "up", Out: o.Out}); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(o.Out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ws := keel.NewWorkers()
	keel.AddWorker[demoArgs](ws, &demoWorker{log: logger})
	client, err := keel.NewClient(d, &keel.Config{
		Workers: ws, Logger: logger,
		Queues:      map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 20}},
		RetryPolicy: &keel.JitterRetryPolicy{Base: time.Second, Cap: 10 * time.Second},
		PeriodicJobs: []*keel.PeriodicJob{{Name: "demo-orders", Schedule: keel.Every(2 * time.Second),
			Construct: func(tick time.Time) (keel.JobArgs, *keel.InsertOpts) {
				return demoArgs{Order: int(tick.Unix() % 100000)}, nil
			}}},
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "keel dev: running; a demo order arrives every 2s. Ctrl-C stops cleanly.")
	if o.Ready != nil {
		o.Ready()
	}
	go reportDev(ctx, client, o.Out)
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}

// reportDev prints queue depth by state every few seconds.
func reportDev[TTx any](ctx context.Context, c *keel.Client[TTx], out io.Writer) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stats, err := c.QueueStats(ctx)
		if err != nil {
			continue
		}
		for _, s := range stats {
			fmt.Fprintf(out, "queue %s: %v\n", s.Queue, s.Counts)
		}
	}
}
