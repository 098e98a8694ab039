package module

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Settings reads one module's settings ("<module>.<key>" in Host.Settings)
// strictly: each getter names a key, its default and its range, and Err
// reports every value out of range or unreadable and every key of the
// module that no getter asked for, which is a typo ("delivery.ack_timout")
// that would otherwise silently leave the default in force.
//
//	s := module.NewSettings("delivery", h.Settings)
//	ackTimeout := s.Duration("ack_timeout", time.Minute, time.Second, time.Hour)
//	window := s.Int("window", 16, 1, 1024)
//	if err := s.Err(); err != nil {
//		return nil, err
//	}
//
// A key given with an empty value keeps its default, except for String,
// which returns what was given. Values are trimmed of surrounding blanks.
type Settings struct {
	module string
	raw    map[string]string
	read   map[string]bool
	errs   []error
}

// NewSettings reads the settings of module from all (the host's map, which
// holds every module's keys).
func NewSettings(module string, all map[string]string) *Settings {
	s := &Settings{module: module, raw: map[string]string{}, read: map[string]bool{}}
	for k, v := range all {
		if key, ok := strings.CutPrefix(k, module+"."); ok {
			s.raw[key] = strings.TrimSpace(v)
		}
	}
	return s
}

// lookup marks key as known and returns its value when one was given.
func (s *Settings) lookup(key string) (string, bool) {
	s.read[key] = true
	v, ok := s.raw[key]
	return v, ok
}

func (s *Settings) fail(key, v, want string) {
	s.errs = append(s.errs, fmt.Errorf("setting %s.%s=%q: want %s", s.module, key, v, want))
}

// Has reports whether key was given a non-empty value (and marks it known).
func (s *Settings) Has(key string) bool {
	v, ok := s.lookup(key)
	return ok && v != ""
}

// String returns key's value as given (empty included), or def. check, if
// not nil, refuses a value by returning what was wanted instead.
func (s *Settings) String(key, def string, check func(string) error) string {
	v, ok := s.lookup(key)
	if !ok {
		return def
	}
	if check != nil {
		if err := check(v); err != nil {
			s.fail(key, v, err.Error())
			return def
		}
	}
	return v
}

// OneOf returns key's value, which must be one of allowed, or def.
func (s *Settings) OneOf(key, def string, allowed ...string) string {
	return s.String(key, def, func(v string) error {
		if !slices.Contains(allowed, v) {
			return errors.New(strings.Join(allowed, ", ") + " or nothing")
		}
		return nil
	})
}

// URL returns key's value, which must be an absolute http(s) URL or empty.
func (s *Settings) URL(key, def string) string {
	return s.String(key, def, func(v string) error {
		if v == "" {
			return nil
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("an http(s) URL")
		}
		return nil
	})
}

// Int returns key's value as an integer in [lo, hi], or def.
func (s *Settings) Int(key string, def, lo, hi int) int {
	v, ok := s.lookup(key)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		s.fail(key, v, fmt.Sprintf("an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

// Duration returns key's value as a duration in [lo, hi], or def.
func (s *Settings) Duration(key string, def, lo, hi time.Duration) time.Duration {
	v, ok := s.lookup(key)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		s.fail(key, v, fmt.Sprintf("a duration from %s to %s (such as 30s)", lo, hi))
		return def
	}
	return d
}

// Bool returns key's value as true or false, or def.
func (s *Settings) Bool(key string, def bool) bool {
	v, ok := s.lookup(key)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		s.fail(key, v, "true or false")
		return def
	}
	return b
}

// Zone returns key's value as a time zone (an IANA name such as
// Asia/Shanghai), or def's zone.
func (s *Settings) Zone(key, def string) *time.Location {
	v, ok := s.lookup(key)
	if !ok || v == "" {
		v = def
	}
	loc, err := time.LoadLocation(v)
	if err != nil {
		s.fail(key, v, "a time zone name such as Asia/Shanghai")
		loc, _ = time.LoadLocation(def)
	}
	return loc
}

// Check adds an error for a rule between settings (a ≤ b), named by the
// keys it relates.
func (s *Settings) Check(ok bool, format string, args ...any) {
	if !ok {
		s.errs = append(s.errs, fmt.Errorf("setting %s: %s", s.module, fmt.Sprintf(format, args...)))
	}
}

// Err reports every refused value and every unknown key, or nil. Call it
// after the last getter.
func (s *Settings) Err() error {
	var unknown []string
	for k := range s.raw {
		if !s.read[k] {
			unknown = append(unknown, s.module+"."+k)
		}
	}
	sort.Strings(unknown)
	errs := append([]error(nil), s.errs...)
	for _, k := range unknown {
		known := make([]string, 0, len(s.read))
		for r := range s.read {
			known = append(known, r)
		}
		sort.Strings(known)
		errs = append(errs, fmt.Errorf("unknown setting %q (%s has %s)", k, s.module, strings.Join(known, ", ")))
	}
	return errors.Join(errs...)
}
