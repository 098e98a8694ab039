package keel

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy decides when a failed attempt runs again.
type RetryPolicy interface {
	// NextRetry returns the delay before the next attempt, given the number
	// of attempts made so far (1 after the first failure).
	NextRetry(attempt int) time.Duration
}

// JitterRetryPolicy is exponential backoff with full jitter: the delay is
// uniform in [0, min(Cap, Base*2^(attempt-1))]. Full jitter spreads retries of
// a burst of failures evenly instead of in synchronized waves.
type JitterRetryPolicy struct {
	Base time.Duration
	Cap  time.Duration
}

// NextRetry implements RetryPolicy.
func (p *JitterRetryPolicy) NextRetry(attempt int) time.Duration {
	ceiling := p.Cap
	if attempt < 1 {
		attempt = 1
	}
	if shift := attempt - 1; shift < 40 {
		if d := p.Base << shift; d > 0 && d < ceiling {
			ceiling = d
		}
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}
