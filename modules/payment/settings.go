package payment

import (
	"fmt"
	"strconv"
	"time"

	"github.com/keelwork/keel/module"
)

// Late-success policies: what happens to money that arrives for a payment
// order already closed.
const (
	// LateManual leaves the payment in 人工核验 for an operator to refund
	// or to apply it by hand (the default: the order may have been
	// re-placed and paid elsewhere, or fulfilled by other means).
	LateManual = "manual"
	// LateRefund refunds it in full at once, with the stable refund number
	// of that intent, and keeps the payment in 人工核验 until the refund is
	// confirmed.
	LateRefund = "refund"
)

// Settings are the module's settings ("payment.<key>").
type Settings struct {
	// TimeScale multiplies every channel horizon and backoff (1 in
	// production; a small factor in tests and keel dev compresses a day of
	// channel retries into seconds).
	TimeScale float64
	// PayTimeout is how long a payment order waits for the buyer before it
	// is closed (after the channel confirms it unpaid).
	PayTimeout time.Duration
	// WeChatHorizon and AlipayHorizon are how long each channel keeps
	// retrying its notification: a payment still pending past it is
	// queried, not left waiting.
	WeChatHorizon, AlipayHorizon time.Duration
	// MaxBody bounds a callback's raw body.
	MaxBody int
	// LatePolicy is LateManual or LateRefund.
	LatePolicy string
	// RefundBackoff is the first wait before querying a refund whose
	// outcome is unknown; it doubles up to RefundBackoffMax.
	RefundBackoff, RefundBackoffMax time.Duration
	// RefundHorizon is how long a refund may stay 结果未知 before it goes
	// to 人工核验.
	RefundHorizon time.Duration
	// RefundMaxCalls bounds the refund calls with one number (retries only
	// after the channel proved the previous one was not executed).
	RefundMaxCalls int
	// SweepEvery is how often due payments and refunds are looked at.
	SweepEvery time.Duration
	// SecurityAlert is the rate of refused callbacks per minute the
	// documented alert fires at (exported as a gauge for the rule).
	SecurityAlert int
	// CallbackBatch bounds the verified successes one group-commit
	// transaction applies (PostgreSQL; 1: a transaction per callback), and
	// CallbackLanes how many such transactions may run at once.
	CallbackBatch, CallbackLanes int
	// ReconLag is how long a paid payment may wait for its ledger entry and
	// its order's update before the intraday reconciliation reports the
	// delay.
	ReconLag time.Duration
}

func parseSettings(raw map[string]string) (*Settings, error) {
	s := module.NewSettings(Name, raw)
	out := &Settings{}
	scale := s.String("time_scale", "1", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return fmt.Errorf("want a factor in (0, 1]")
		}
		return nil
	})
	out.TimeScale, _ = strconv.ParseFloat(scale, 64)
	out.PayTimeout = s.Duration("pay_timeout", 2*time.Hour, time.Minute, 30*24*time.Hour)
	out.WeChatHorizon = s.Duration("wechat_horizon", 24*time.Hour+10*time.Minute, time.Minute, 7*24*time.Hour)
	out.AlipayHorizon = s.Duration("alipay_horizon", 25*time.Hour+10*time.Minute, time.Minute, 7*24*time.Hour)
	out.MaxBody = s.Int("callback_max_bytes", 64<<10, 1<<10, 1<<20)
	out.LatePolicy = s.OneOf("late_success_policy", LateManual, LateManual, LateRefund)
	out.RefundBackoff = s.Duration("refund_backoff", time.Minute, time.Second, time.Hour)
	out.RefundBackoffMax = s.Duration("refund_backoff_max", time.Hour, time.Second, 24*time.Hour)
	out.RefundHorizon = s.Duration("refund_horizon", 48*time.Hour, time.Minute, 30*24*time.Hour)
	out.RefundMaxCalls = s.Int("refund_max_calls", 5, 1, 100)
	out.SweepEvery = s.Duration("sweep_every", 30*time.Second, time.Millisecond, time.Hour)
	out.SecurityAlert = s.Int("security_alert_per_minute", 5, 1, 1_000_000)
	out.CallbackBatch = s.Int("callback_batch", 200, 1, 1000)
	out.CallbackLanes = s.Int("callback_lanes", 2, 1, 16)
	out.ReconLag = s.Duration("recon_lag", 5*time.Minute, time.Second, 24*time.Hour)
	s.Check(out.RefundBackoff <= out.RefundBackoffMax, "refund_backoff must not exceed refund_backoff_max")
	if err := s.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// scaled is d compressed by the time scale (never below a millisecond).
func (s *Settings) scaled(d time.Duration) time.Duration {
	return max(time.Duration(float64(d)*s.TimeScale), time.Millisecond)
}
