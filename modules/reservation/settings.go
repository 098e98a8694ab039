package reservation

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	// The business zone must load on hosts without a zoneinfo database.
	_ "time/tzdata"
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

// settingKeys are the accepted keys; any other "reservation." key is a typo.
var settingKeys = map[string]bool{
	"zone": true, "page_size": true, "tx_size": true, "scan_interval": true,
	"compensation_interval": true, "max_retries": true, "queue": true, "workers": true,
	"payment_minutes": true, "webhook_url": true, "async_commit": true,
}

func parseSettings(raw map[string]string) (*settings, error) {
	s := &settings{pageSize: DefaultPageSize, txSize: DefaultTxSize, scanInterval: DefaultScanInterval,
		compensationInterval: DefaultCompensationInterval, maxRetries: DefaultMaxRetries,
		queue: DefaultQueue, workers: DefaultWorkers, paymentMinutes: DefaultPaymentMinutes,
		asyncCommit: DefaultAsyncCommit}
	zone := DefaultZone
	for k, v := range raw {
		name, ok := strings.CutPrefix(k, "reservation.")
		if !ok {
			continue
		}
		if !settingKeys[name] {
			return nil, fmt.Errorf("unknown setting %q", k)
		}
		if name == "zone" {
			zone = v
			continue
		}
		if err := s.set(name, strings.TrimSpace(v)); err != nil {
			return nil, fmt.Errorf("setting %s=%q: %w", k, v, err)
		}
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("setting reservation.zone=%q: %w", zone, err)
	}
	s.zone = loc
	if s.txSize > s.pageSize {
		return nil, fmt.Errorf("setting reservation.tx_size (%d) exceeds reservation.page_size (%d)", s.txSize, s.pageSize)
	}
	return s, nil
}

func (s *settings) set(name, v string) error {
	var err error
	switch name {
	case "page_size":
		s.pageSize, err = intIn(v, 1, 100000)
	case "tx_size":
		s.txSize, err = intIn(v, 1, 1000)
	case "max_retries":
		s.maxRetries, err = intIn(v, 1, 100)
	case "workers":
		s.workers, err = intIn(v, 1, 1000)
	case "payment_minutes":
		s.paymentMinutes, err = intIn(v, 1, 1440)
	case "scan_interval":
		s.scanInterval, err = durationIn(v, time.Second, 24*time.Hour)
	case "compensation_interval":
		s.compensationInterval, err = durationIn(v, time.Minute, 7*24*time.Hour)
	case "queue":
		if v == "" || len(v) > 128 {
			return fmt.Errorf("want 1..128 characters")
		}
		s.queue = v
	case "async_commit":
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			return fmt.Errorf("want true or false")
		}
		s.asyncCommit = b
	case "webhook_url":
		if v != "" {
			u, perr := url.Parse(v)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("want an http(s) URL")
			}
		}
		s.webhookURL = v
	}
	return err
}

func intIn(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("want an integer")
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("want %d..%d", lo, hi)
	}
	return n, nil
}

func durationIn(v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 30s")
	}
	if d < lo || d > hi {
		return 0, fmt.Errorf("want %s..%s", lo, hi)
	}
	return d, nil
}
