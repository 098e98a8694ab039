package channel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelwork/keel/modules/payment/channel"
	"github.com/keelwork/keel/modules/payment/paysim"
)

var kinds = []channel.Kind{channel.KindWeChat, channel.KindAlipay}

func startSim(t *testing.T, opts paysim.Options) *paysim.Sim {
	t.Helper()
	s, err := paysim.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting simulator: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newChannel(t *testing.T, cfg channel.Config) *channel.Channel {
	t.Helper()
	ch, err := channel.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("channel.New(%s): %v", cfg.Kind, err)
	}
	return ch
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantErr(t *testing.T, what string, err error, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want one wrapping %v", what, err, target)
	}
}

// chinaDay is today in the channels' zone, the day their bills use.
func chinaDay() time.Time { return time.Now().In(time.FixedZone("CST", 8*3600)) }

func errorIs(err, target error) bool { return errors.Is(err, target) }
