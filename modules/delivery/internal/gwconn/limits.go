package gwconn

import (
	"errors"
	"fmt"
	"time"
)

// Limits are the configuration checks both servers share.
type Limits struct {
	Authenticate, Handler bool                     // whether the required hooks are set
	Durations             map[string]time.Duration // by field name
	MissesName            string                   // the field counting unanswered link tests
	Misses, Window        int
}

// Validate joins errs (the protocol's own findings) with the shared
// checks, prefixed with proto's config.
func (l Limits) Validate(proto string, errs ...error) error {
	if !l.Authenticate {
		errs = append(errs, errors.New("Authenticate is required"))
	}
	if !l.Handler {
		errs = append(errs, errors.New("Handler is required"))
	}
	for name, d := range l.Durations {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative", name, d))
		}
	}
	if l.Misses < 0 || l.Window < 0 {
		errs = append(errs, fmt.Errorf("%s %d and Window %d must not be negative", l.MissesName, l.Misses, l.Window))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s config: %w", proto, err)
	}
	return nil
}
