package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
)

// demoArgs is the demo kind: a delivery to an imaginary counterpart that is
// slow, sometimes fails, and sometimes leaves the result unknown.
type demoArgs struct {
	Order int `json:"order"`
}

func (demoArgs) Kind() string { return "demo.deliver" }

type demoWorker struct{}

func (w *demoWorker) Work(ctx context.Context, job *keel.Job[demoArgs]) error {
	if err := demoLatency(ctx); err != nil {
		return err
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

func demoLatency(ctx context.Context) error {
	select {
	case <-time.After(time.Duration(20+rand.IntN(200)) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// notifyArgs is the second demo kind: a notification to a tenant's client,
// which may be offline (wait), opted out (skip) or refuse (fail).
type notifyArgs struct {
	Tenant int `json:"tenant"`
	Seq    int `json:"seq"`
}

func (notifyArgs) Kind() string { return "demo.notify" }

// The words of what the demo's workers end or wait with, for the console's
// job pages (the kinds' scope is "demo").
func init() {
	web.RegisterJobKinds(map[string][2]string{
		"demo.deliver": {"演示：投递订单", "Demo: deliver an order"},
		"demo.notify":  {"演示：通知租户", "Demo: notify a tenant"},
	})
	web.RegisterQueues(map[string][2]string{
		"notify": {"演示通知", "Demo notices"},
	})
	web.RegisterFields("demo", map[string][2]string{
		"order":        {"订单", "Order"},
		"tenant":       {"租户", "Tenant"},
		"seq":          {"序号", "Sequence"},
		"ack":          {"对方已确认", "Acknowledged"},
		"confirmation": {"确认号", "Confirmation"},
	})
	// The reason keel dev gives the admin token it makes on a first run.
	web.RegisterReasons("", web.SystemReason{Text: `first run of keel dev`, ZH: "首次运行 keel dev 时创建", EN: "Made on keel dev's first run"})
	web.RegisterReasons("demo",
		web.SystemReason{Text: `recipient opted out`, ZH: "收件人已退订", EN: "The recipient opted out"},
		web.SystemReason{Text: `client rejected the message`, ZH: "客户端拒收该消息", EN: "The client rejected the message"},
		web.SystemReason{Text: `tenant (?P<tenant>\d+) gateway refused \(retryable\)`, ZH: "租户 {tenant} 的网关拒绝（将重试）", EN: "Tenant {tenant}'s gateway refused (retried)"},
		web.SystemReason{Text: `client offline: waiting for a connection`, ZH: "客户端离线，等待连接", EN: "Client offline: waiting for a connection"},
		web.SystemReason{Text: `counterpart busy \(retryable\)`, ZH: "对方繁忙（将重试）", EN: "The counterpart was busy (retried)"},
		web.SystemReason{Text: `timed out after sending`, ZH: "发出后超时，结果未知（先查询再重试）", EN: "Timed out after sending: outcome unknown (queried before any retry)"},
		web.SystemReason{Text: `counterpart rejected the order`, ZH: "对方拒绝了该订单", EN: "The counterpart rejected the order"},
		web.SystemReason{Text: `client reconnected; delivered and acknowledged`, ZH: "客户端重连后已送达并确认", EN: "The client reconnected; delivered and acknowledged"},
		web.SystemReason{Text: `confirmed by query`, ZH: "查询确认已送达", EN: "Confirmed by a query"},
	)
}

type notifyWorker struct{}

func (w *notifyWorker) Work(ctx context.Context, job *keel.Job[notifyArgs]) error {
	if err := demoLatency(ctx); err != nil {
		return err
	}
	if job.WaitExpired() {
		return keel.RecordResult(ctx, "client reconnected; delivered and acknowledged")
	}
	switch r := rand.IntN(100); {
	case r < 8:
		return keel.JobWait("client offline: waiting for a connection", time.Now().Add(20*time.Second))
	case r < 12:
		return keel.JobSkip("recipient opted out")
	case r < 17 && job.Args.Tenant == 3:
		return errors.New("tenant 3 gateway refused (retryable)")
	case r < 19:
		return keel.JobFail(errors.New("client rejected the message"))
	}
	return keel.RecordResult(ctx, map[string]any{"ack": true, "seq": job.Args.Seq})
}

// addDemo registers the demo kinds, their periodic inputs and a flow limit
// with a breaker on the demo tenants.
func addDemo(cfg *keel.Config, queues map[string]int) {
	ws := keel.NewWorkers()
	keel.AddWorker[demoArgs](ws, &demoWorker{})
	keel.AddWorker[notifyArgs](ws, &notifyWorker{})
	cfg.Workers = ws
	cfg.Queues = map[string]keel.QueueConfig{}
	for name, n := range queues {
		cfg.Queues[name] = keel.QueueConfig{MaxWorkers: n}
	}
	for _, q := range []string{keel.DefaultQueue, "notify"} {
		if _, ok := cfg.Queues[q]; !ok {
			cfg.Queues[q] = keel.QueueConfig{MaxWorkers: 10}
		}
	}
	cfg.RetryPolicy = &keel.JitterRetryPolicy{Base: time.Second, Cap: 10 * time.Second}
	cfg.FlowLimits = []keeltype.FlowLimit{{Pattern: "tenant:*", Rate: 5, MaxRunning: 3, BreakerFailures: 4,
		BreakerCooldown: 15 * time.Second}}
	cfg.PeriodicJobs = []*keel.PeriodicJob{
		{Name: "demo-orders", Schedule: keel.Every(2 * time.Second),
			Construct: func(tick time.Time) (keel.JobArgs, *keel.InsertOpts) {
				return demoArgs{Order: int(tick.Unix() % 100000)}, nil
			}},
		{Name: "demo-notify", Schedule: keel.Every(time.Second),
			Construct: func(tick time.Time) (keel.JobArgs, *keel.InsertOpts) {
				t := 1 + int(tick.Unix()%3)
				return notifyArgs{Tenant: t, Seq: int(tick.Unix() % 100000)},
					&keel.InsertOpts{Queue: "notify", FlowKey: fmt.Sprintf("tenant:%d", t)}
			}},
	}
}
