package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gocmpp "github.com/bigwhite/gocmpp"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/module"
)

// LoadConfig configures RunLoad.
type LoadConfig struct {
	// Apps is the number of customer applications, each with one CMPP
	// connection (gocmpp). Default 200.
	Apps int
	// Records is the number of deliveries. Default 50,000.
	Records int
	// Workers is the number of push jobs the instance runs at once.
	// Default 2 × Apps.
	Workers int
	// Window is the unanswered DELIVERs allowed per connection. Default 16.
	Window int
	// Timeout bounds the timed part. Default 10 minutes.
	Timeout time.Duration
	// Logger receives the module's and engine's logs. Default: discarded.
	Logger *slog.Logger
}

// LoadResult is what RunLoad measured.
type LoadResult struct {
	Apps, Records int
	// Delivered: records whose status is delivered at the end (the ACK
	// was applied).
	Delivered int
	// Received: DELIVERs the customers received and acknowledged.
	Received int
	// Duplicates: DELIVERs beyond the first of a record; Lost: records
	// never received.
	Duplicates, Lost int
	// Elapsed runs from the queue's resume to the last record delivered.
	Elapsed   time.Duration
	PerSecond float64
	// HeapPeakMB and HeapEndMB are Go heap in use (the instance and the
	// customers, one process), sampled every 50 ms.
	HeapPeakMB, HeapEndMB float64
	Goroutines            int
	SeedElapsed           time.Duration
}

func (r *LoadResult) String() string {
	return fmt.Sprintf("%d deliveries to %d CMPP connections in %s: %.0f deliveries/s with ACKs; delivered %d, received %d, "+
		"duplicates %d, lost %d; heap peak %.1f MB, end %.1f MB; %d goroutines; seeding %s",
		r.Records, r.Apps, r.Elapsed.Round(time.Millisecond), r.PerSecond, r.Delivered, r.Received, r.Duplicates, r.Lost,
		r.HeapPeakMB, r.HeapEndMB, r.Goroutines, r.SeedElapsed.Round(time.Millisecond))
}

func (c *LoadConfig) defaults() {
	if c.Apps <= 0 || c.Apps > 9999 {
		c.Apps = 200
	}
	if c.Records <= 0 {
		c.Records = 50000
	}
	if c.Workers <= 0 {
		c.Workers = 2 * c.Apps
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// RunLoad is the gateway's load benchmark (`go test -bench Load`): one
// Keel instance with the delivery module on d (migrated with the delivery line), Apps customer
// applications each connected once over CMPP 3.0 with gocmpp and
// acknowledging every DELIVER at once, rate limits raised out of the way,
// and Records pending MO records with their push jobs seeded while the
// delivery queue is paused. It then resumes the queue and measures until
// every record is delivered, checking that none was lost or delivered
// twice. Everything it creates is left in the database.
func RunLoad[TTx any](ctx context.Context, d keeldriver.Driver[TTx], db keelsql.DB[TTx], cfg LoadConfig) (*LoadResult, error) {
	cfg.defaults()
	run, err := startLoadInstance(ctx, d, db, &cfg)
	if err != nil {
		return nil, err
	}
	defer run.stop()
	if err := run.setup(ctx); err != nil {
		return nil, err
	}
	return run.measure(ctx)
}

type loadRun[TTx any] struct {
	cfg   *LoadConfig
	m     *Module[TTx]
	c     *keel.Client[TTx]
	ent   int64
	apps  []*Application
	custs []*customerSim
	mu    sync.Mutex
	seen  map[uint64]int
	// allSeen is closed when every record has reached a customer.
	allSeen chan struct{}
	recv    atomic.Int64
	seeded  time.Duration
}

func startLoadInstance[TTx any](ctx context.Context, d keeldriver.Driver[TTx], db keelsql.DB[TTx], cfg *LoadConfig) (*loadRun[TTx], error) {
	m, err := New(&module.Host[TTx]{DB: db, Logger: cfg.Logger, Settings: map[string]string{
		"delivery.cmpp_addr": "127.0.0.1:0", "delivery.window": strconv.Itoa(cfg.Window),
		"delivery.workers": strconv.Itoa(cfg.Workers), "delivery.ack_inline": "10s", "delivery.heartbeat": "1s",
		"delivery.gateway_id": "77",
	}})
	if err != nil {
		return nil, err
	}
	kc := &keel.Config{Logger: cfg.Logger}
	if err := m.Configure(kc); err != nil {
		return nil, err
	}
	c, err := keel.NewClient(d, kc)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	if err := m.Start(ctx, c); err != nil {
		_ = c.Stop(ctx)
		return nil, err
	}
	return &loadRun[TTx]{cfg: cfg, m: m, c: c, seen: map[uint64]int{}, allSeen: make(chan struct{})}, nil
}

func (r *loadRun[TTx]) stop() {
	for _, c := range r.custs {
		_ = c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = r.m.Stop(ctx)
	_ = r.c.Stop(ctx)
}

// setup creates the applications, connects the customers and seeds the
// records with the queue paused.
func (r *loadRun[TTx]) setup(ctx context.Context) error {
	tag := r.freeTag()
	var err error
	if r.ent, err = r.m.CreateEnterprise(ctx, "load-"+tag); err != nil {
		return err
	}
	for k := range r.cfg.Apps {
		a, err := r.m.CreateApplication(ctx, NewApplication{EnterpriseID: r.ent, Name: fmt.Sprintf("load-%s-%d", tag, k),
			Account: fmt.Sprintf("%s%04d", tag, k), Secret: "load",
			Protocol: ProtoCMPP30, MOEnabled: true, ReportEnabled: true, Rate: 1e6})
		if err != nil {
			return err
		}
		r.apps = append(r.apps, a)
	}
	// Limits out of the way: the applications' own rate limits are
	// removed, so the gateway, not a limit, is what is measured.
	for _, a := range r.apps {
		if err := r.c.FlowLimitDelete(ctx, a.FlowKey(), QueueName, "load benchmark: unlimited"); err != nil {
			return err
		}
	}
	if _, err := r.c.QueuePause(ctx, QueueName, "load benchmark: seeding"); err != nil {
		return err
	}
	for _, a := range r.apps {
		cs, err := dialQuietCustomer(r.m.Addr(), a.Account, "load", gocmpp.V30, r.ack)
		if err != nil {
			return err
		}
		r.custs = append(r.custs, cs)
	}
	t0 := time.Now()
	if err := r.seed(ctx); err != nil {
		return err
	}
	r.seeded = time.Since(t0)
	return nil
}

// freeTag picks a two-character account prefix no application uses, so
// that runs on one database never collide (accounts are 6 characters).
func (r *loadRun[TTx]) freeTag() string {
	for {
		tag := randomHex(1)
		used := false
		for _, a := range r.m.apps.all() {
			if len(a.Account) == 6 && a.Account[:2] == tag {
				used = true
			}
		}
		if !used {
			return tag
		}
	}
}

func (r *loadRun[TTx]) ack(d *delivered) ackAction {
	r.mu.Lock()
	r.seen[d.Outer]++
	if len(r.seen) == r.cfg.Records && r.seen[d.Outer] == 1 {
		close(r.allSeen)
	}
	r.mu.Unlock()
	r.recv.Add(1)
	return ackAction{}
}

// seed inserts the records and their push jobs, 5,000 per transaction.
func (r *loadRun[TTx]) seed(ctx context.Context) error {
	const chunk = 5000
	payload, _ := json.Marshal(&MOPayload{DestID: "10690", MsgFmt: 0, Content: []byte("load")})
	for done := 0; done < r.cfg.Records; done += chunk {
		n := min(chunk, r.cfg.Records-done)
		recs := make([]bulkRecord, n)
		for k := range recs {
			a := r.apps[(done+k)%len(r.apps)]
			recs[k] = bulkRecord{Kind: KindMO, AppID: a.ID, EnterpriseID: r.ent,
				MsgID: strconv.FormatUint(uint64(r.m.srv.NewMsgID()), 10), Phone: "13800000000",
				Payload: payload, UpstreamKey: fmt.Sprintf("load:%d:%d", r.ent, done+k)}
		}
		err := r.m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
			ids, err := r.m.st.insertMany(ctx, tx, recs)
			if err != nil {
				return err
			}
			params := make([]keel.InsertParams, 0, n)
			for _, rec := range recs {
				params = append(params, keel.InsertParams{Args: PushArgs{DeliveryID: ids[rec.UpstreamKey], AppID: rec.AppID, RecordKind: KindMO},
					Opts: &keel.InsertOpts{Queue: QueueName, FlowKey: appKey(rec.AppID)}})
			}
			_, err = r.c.InsertManyTx(ctx, tx.Native(), params)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// waitDelivered polls until the database holds every record as delivered:
// a customer's ACK is concluded into the record in a batch a moment later.
func (r *loadRun[TTx]) waitDelivered(ctx context.Context, deadline time.Time) (int64, error) {
	f := Filter{EnterpriseID: r.ent, Status: StatusDelivered}
	for {
		n, err := r.m.st.countRecords(ctx, &f, nil)
		if err != nil || int(n) >= r.cfg.Records {
			return n, err
		}
		if time.Now().After(deadline) {
			return n, errors.New("load benchmark: timed out before every record was delivered")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// measure resumes the queue and waits until every record is delivered.
func (r *loadRun[TTx]) measure(ctx context.Context) (*LoadResult, error) {
	res := &LoadResult{Apps: r.cfg.Apps, Records: r.cfg.Records, SeedElapsed: r.seeded}
	var peak atomic.Uint64
	stopSampling := sampleHeap(&peak)
	start := time.Now()
	if _, err := r.c.QueueResume(ctx, QueueName, "load benchmark: go"); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(r.cfg.Timeout)
	// Wait on the customers' side first: polling the database for the
	// delivered count while the work runs would itself be a load (the
	// filtered count joins three tables) competing with what is measured.
	select {
	case <-r.allSeen:
	case <-time.After(r.cfg.Timeout):
	case <-ctx.Done():
		stopSampling()
		return nil, ctx.Err()
	}
	n, err := r.waitDelivered(ctx, deadline)
	res.Delivered = int(n)
	if err != nil {
		stopSampling()
		return res, err
	}
	res.Elapsed = time.Since(start)
	stopSampling()
	res.PerSecond = float64(res.Records) / res.Elapsed.Seconds()
	res.HeapPeakMB = float64(peak.Load()) / (1 << 20)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapEndMB, res.Goroutines = float64(ms.HeapInuse)/(1<<20), runtime.NumGoroutine()
	r.mu.Lock()
	for _, n := range r.seen {
		res.Received += n
		if n > 1 {
			res.Duplicates += n - 1
		}
	}
	res.Lost = res.Records - len(r.seen)
	r.mu.Unlock()
	return res, nil
}

// sampleHeap records the peak heap in use until the returned stop.
func sampleHeap(peak *atomic.Uint64) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
