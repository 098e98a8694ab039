package inventory

import (
	"time"

	"github.com/keelwork/keel/module"
)

// Settings are the module's "inventory.*" settings.
type Settings struct {
	// ReservationTTL is how long a reservation holds stock before the
	// timeout check asks the order service and the warehouse about it.
	ReservationTTL time.Duration
	// RecheckAfter delays the next check after an unknown answer.
	RecheckAfter time.Duration
	// SweepEvery is how often the timeout check runs.
	SweepEvery time.Duration
	// MaxChecks sends a reservation to manual handling (a conflict ticket)
	// after this many unknown answers.
	MaxChecks int
	// ApprovalMinor is the value (minor units) above which an adjustment
	// needs a second approver.
	ApprovalMinor int64
	// Coalesce routes reservations through the hot-SKU coalescer.
	Coalesce bool
	// CoalesceMax bounds the requests one coalesced batch carries.
	CoalesceMax int
	// CoalesceLanes is how many batches may run at once (0: 4 on
	// PostgreSQL, 1 on SQLite, whose one writer would only queue them).
	CoalesceLanes int
	// LatencyBudget and PoolWaitBudget are the admission watermark: past
	// either, new reservations are refused with 429.
	LatencyBudget, PoolWaitBudget time.Duration
	// ReservationConns is the most database transactions reservations
	// hold at once (plain requests and coalesced batches together); the
	// rest of the pool is the share confirmations, releases and the
	// consumers keep under a reservation flood. A reservation that cannot
	// get one within PoolWaitBudget is refused like one over the
	// watermark. Keep it below the pool size by that share.
	ReservationConns int
	// RetryAfter is what a refused caller is told to wait.
	RetryAfter time.Duration
	// OrderURL and WarehouseURL are the outside world's query endpoints
	// (empty: the simulators' in `keel dev`).
	OrderURL, WarehouseURL string
	// DemoFlashSale runs the simulated flash sale in `keel dev`.
	DemoFlashSale bool
}

func parseSettings(all map[string]string) (*Settings, error) {
	s := module.NewSettings(Name, all)
	out := &Settings{
		ReservationTTL:   s.Duration("reservation_ttl", 15*time.Minute, time.Second, 7*24*time.Hour),
		RecheckAfter:     s.Duration("recheck_after", time.Minute, time.Millisecond, 24*time.Hour),
		SweepEvery:       s.Duration("sweep_every", 10*time.Second, 10*time.Millisecond, time.Hour),
		MaxChecks:        s.Int("max_checks", 5, 1, 1000),
		ApprovalMinor:    int64(s.Int("approval_minor", 100_000, 0, 1<<40)),
		Coalesce:         s.Bool("coalesce", true),
		CoalesceMax:      s.Int("coalesce_max", 256, 1, 10_000),
		CoalesceLanes:    s.Int("coalesce_lanes", 0, 0, 64),
		LatencyBudget:    s.Duration("latency_budget", 500*time.Millisecond, time.Millisecond, time.Minute),
		PoolWaitBudget:   s.Duration("pool_wait_budget", 200*time.Millisecond, time.Millisecond, time.Minute),
		ReservationConns: s.Int("reservation_conns", 8, 1, 1000),
		RetryAfter:       s.Duration("retry_after", 2*time.Second, time.Second, time.Hour),
		OrderURL:         s.URL("order_url", ""),
		WarehouseURL:     s.URL("warehouse_url", ""),
		DemoFlashSale:    s.Bool("demo_flash_sale", true),
	}
	return out, s.Err()
}

// lanes is the coalescer's lane count on dialect.
func (s *Settings) lanes(dialect string) int {
	switch {
	case s.CoalesceLanes > 0:
		return s.CoalesceLanes
	case dialect == "sqlite":
		return 1
	}
	return 4
}
