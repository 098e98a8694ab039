package reservation

import (
	"errors"
	"time"
	// The business zone must load on hosts without a zoneinfo database.
	_ "time/tzdata"

	"github.com/keelwork/keel/module"
)

// Setting defaults. Each is read from Host.Settings under "reservation.<name>".
const (
	// DefaultZone is the business time zone: time bands and the console use it.
	DefaultZone = "Asia/Shanghai"
	// DefaultPageSize bounds the reservations one scan run claims.
	DefaultPageSize = 200
	// DefaultTxSize bounds the reservations one release transaction holds.
	DefaultTxSize = 20
	// DefaultScanInterval is the periodic scan's period.
	DefaultScanInterval = 30 * time.Second
	// DefaultCompensationInterval is the compensation job's period.
	DefaultCompensationInterval = time.Hour
	// DefaultMaxRetries is how many runs may fail a record before it is
	// dead-lettered.
	DefaultMaxRetries = 5
	// DefaultQueue is the engine queue of the module's jobs.
	DefaultQueue = "reservation"
	// DefaultWorkers is how many of the module's jobs run at once per
	// instance.
	DefaultWorkers = 10
	// DefaultPaymentMinutes is how long an unpaid booking holds its place.
	DefaultPaymentMinutes = 15
	// DefaultAsyncCommit lets the scan's release transactions on
	// PostgreSQL commit without waiting for the WAL flush.
	DefaultAsyncCommit = true
)

// settings are the module's parsed settings.
type settings struct {
	zone                 *time.Location
	pageSize             int
	txSize               int
	scanInterval         time.Duration
	compensationInterval time.Duration
	maxRetries           int
	queue                string
	workers              int
	paymentMinutes       int
	webhookURL           string
	asyncCommit          bool
}

func parseSettings(raw map[string]string) (*settings, error) {
	r := module.NewSettings(Name, raw)
	s := &settings{
		zone:                 r.Zone("zone", DefaultZone),
		pageSize:             r.Int("page_size", DefaultPageSize, 1, 100000),
		txSize:               r.Int("tx_size", DefaultTxSize, 1, 1000),
		scanInterval:         r.Duration("scan_interval", DefaultScanInterval, time.Second, 24*time.Hour),
		compensationInterval: r.Duration("compensation_interval", DefaultCompensationInterval, time.Minute, 7*24*time.Hour),
		maxRetries:           r.Int("max_retries", DefaultMaxRetries, 1, 100),
		queue:                r.String("queue", DefaultQueue, queueName),
		workers:              r.Int("workers", DefaultWorkers, 1, 1000),
		paymentMinutes:       r.Int("payment_minutes", DefaultPaymentMinutes, 1, 1440),
		webhookURL:           r.URL("webhook_url", ""),
		asyncCommit:          r.Bool("async_commit", DefaultAsyncCommit),
	}
	r.Check(s.txSize <= s.pageSize, "reservation.tx_size (%d) exceeds reservation.page_size (%d)", s.txSize, s.pageSize)
	if err := r.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func queueName(v string) error {
	if v == "" || len(v) > 128 {
		return errors.New("1 to 128 characters")
	}
	return nil
}
