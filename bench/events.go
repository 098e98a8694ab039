package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/keelwork/keel/keelbench"
	"github.com/keelwork/keel/keelsql"
)

// The events comparison: Keel's relay (outbox → JetStream, through
// keelbench, the code behind `keel bench --mode events`) against
// Watermill's SQL outbox forwarder (watermill-sql's PostgreSQL subscriber
// feeding the forwarder component, publishing to JetStream through
// watermill-nats with JetStream and message-id tracking on), on the same
// database and broker, in the same run: each side gets a backlog of N events
// committed up front and is timed until the broker stored all N.

func defaultNATSURL() string {
	for _, k := range []string{"KEEL_NATS_URL", "KEEL_TEST_NATS_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "nats://127.0.0.1:4222"
}

// runKeelRelay is one Keel relay run on a fresh schema and stream.
func runKeelRelay(ctx context.Context, c *runConfig, natsURL string) (*Result, error) {
	r, err := keelbench.RunEvents(ctx, &keelbench.EventsConfig{DatabaseURL: c.DatabaseURL, NATSURL: natsURL, N: c.N,
		Phases: []string{"relay"}, Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	return &Result{Mode: "events", Jobs: r.N, Elapsed: r.RelayElapsed, JobsPerSec: r.RelayPerSec}, nil
}

// runWatermillRelay is one Watermill forwarder run on a fresh schema and stream.
func runWatermillRelay(ctx context.Context, c *runConfig, natsURL string) (*Result, error) {
	tag := randTag()
	schema := "wm_bench_" + tag
	admin, err := pgx.Connect(ctx, keelsql.SingleConnURL(c.DatabaseURL))
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("creating schema: %w", err)
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE") }()
	pcfg, err := pgxpool.ParseConfig(c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	pcfg.ConnConfig.RuntimeParams["search_path"] = schema
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	logger := watermill.NopLogger{}
	fwdTopic := "fwd_" + tag
	destTopic := "wmbench_" + tag
	poll := 10 * time.Millisecond
	sub, err := wmsql.NewSubscriber(wmsql.BeginnerFromPgx(pool), wmsql.SubscriberConfig{
		SchemaAdapter:    wmsql.DefaultPostgreSQLSchema{},
		OffsetsAdapter:   wmsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
		PollInterval:     poll,
		ConsumerGroup:    "bench",
	}, logger)
	if err != nil {
		return nil, err
	}
	if err := sub.SubscribeInitialize(fwdTopic); err != nil {
		return nil, fmt.Errorf("creating Watermill's tables: %w", err)
	}
	// The backlog: N enveloped messages committed in transactions of 500,
	// as a business transaction would write them (not timed).
	for i := 0; i < c.N; i += 500 {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		sp, err := wmsql.NewPublisher(wmsql.TxFromPgx(tx), wmsql.PublisherConfig{SchemaAdapter: wmsql.DefaultPostgreSQLSchema{}}, logger)
		if err != nil {
			_ = tx.Rollback(ctx)
			return nil, err
		}
		fp := forwarder.NewPublisher(sp, forwarder.PublisherConfig{ForwarderTopic: fwdTopic})
		var msgs []*message.Message
		for j := i; j < min(i+500, c.N); j++ {
			msgs = append(msgs, message.NewMessage(fmt.Sprintf("ev-%09d", j),
				[]byte(fmt.Sprintf(`{"order":"o-%d","amount":%d,"currency":"CNY","note":"benchmark event payload"}`, j%1000, j))))
		}
		if err := fp.Publish(destTopic, msgs...); err != nil {
			_ = tx.Rollback(ctx)
			return nil, fmt.Errorf("filling Watermill's outbox: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, err
		}
	}

	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	defer nc.Close()
	pub, err := wmnats.NewPublisherWithNatsConn(nc, wmnats.PublisherPublishConfig{
		Marshaler:         &wmnats.NATSMarshaler{},
		SubjectCalculator: wmnats.DefaultSubjectCalculator,
		JetStream:         wmnats.JetStreamConfig{AutoProvision: true, TrackMsgId: true},
	}, logger)
	if err != nil {
		return nil, err
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), destTopic) }()

	fwd, err := forwarder.NewForwarder(sub, pub, logger, forwarder.Config{ForwarderTopic: fwdTopic})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- fwd.Run(rctx) }()
	defer func() { _ = fwd.Close() }()
	for {
		var n uint64
		if st, err := js.Stream(ctx, destTopic); err == nil {
			if info, err := st.Info(ctx); err == nil {
				n = info.State.Msgs
			}
		}
		if n >= uint64(c.N) {
			break
		}
		select {
		case err := <-runErr:
			return nil, fmt.Errorf("the forwarder stopped after %d of %d: %v", n, c.N, err)
		default:
		}
		if time.Since(t0) > 15*time.Minute {
			return nil, fmt.Errorf("only %d of %d forwarded after 15 minutes", n, c.N)
		}
		time.Sleep(2 * time.Millisecond) // polling interval of the stream's count
	}
	el := time.Since(t0)
	return &Result{Mode: "events", Jobs: c.N, Elapsed: el, JobsPerSec: float64(c.N) / el.Seconds()}, nil
}

func randTag() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runEventsMode runs the rounds of the events comparison, alternating
// which side goes first, and prints medians and the median ratio.
func runEventsMode(ctx context.Context, cfg *runConfig, o *options, out io.Writer) (*modeSummary, error) {
	keel := engine{"keel", func(ctx context.Context, c *runConfig) (*Result, error) { return runKeelRelay(ctx, c, o.NATSURL) }}
	wm := engine{"watermill", func(ctx context.Context, c *runConfig) (*Result, error) { return runWatermillRelay(ctx, c, o.NATSURL) }}
	s := &modeSummary{Mode: "events", Peer: "watermill"}
	for round := 1; round <= o.Rounds; round++ {
		order := []engine{keel, wm}
		if round%2 == 0 {
			order = []engine{wm, keel}
		}
		for _, e := range order {
			if o.Only != "" && o.Only != e.name {
				continue
			}
			checkpoint(ctx, cfg.DatabaseURL)
			r, err := e.run(ctx, cfg)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round, e.name, err)
			}
			fmt.Fprintf(out, "round %d/%d %-9s relay %d events outbox→JetStream in %.2fs, %.0f events/s\n",
				round, o.Rounds, e.name, r.Jobs, r.Elapsed.Seconds(), r.JobsPerSec)
			if e.name == "keel" {
				s.Keel = append(s.Keel, r)
			} else {
				s.River = append(s.River, r)
			}
		}
		if len(s.Keel) == round && len(s.River) == round {
			fmt.Fprintf(out, "round %d/%d ratio keel/watermill %.2fx\n", round, o.Rounds, s.Keel[round-1].JobsPerSec/s.River[round-1].JobsPerSec)
		}
	}
	if o.Only != "" {
		return nil, nil
	}
	return s, nil
}

func validEventsMode(modes []string) error {
	for _, m := range modes {
		if m == "events" && len(modes) > 1 {
			return errors.New("--mode events runs alone (its peer is Watermill, not River)")
		}
	}
	return nil
}
