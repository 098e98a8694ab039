package domain

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"
)

// Carrier is one carrier as configuration: its codes, how its webhooks are
// signed, its pull API, its quota split into shares, and its timeouts.
type Carrier struct {
	// Code is the carrier's stable short name ([a-z0-9_-]{2,32}).
	Code   string `json:"code"`
	NameZH string `json:"name_zh"`
	NameEN string `json:"name_en"`
	// Secrets sign webhooks: the first is current, the others are accepted
	// during a rotation. At least one; each at least 16 bytes.
	Secrets []string `json:"secrets"`
	// SignatureHeader carries "sha256=<hex HMAC>"; TimestampHeader the unix
	// seconds the signature covers (default X-Tracking-Signature,
	// X-Tracking-Timestamp).
	SignatureHeader string `json:"signature_header,omitempty"`
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// TimestampWindow refuses signatures older or newer than this (default
	// 5m), so a captured push cannot be replayed later.
	TimestampWindow Duration `json:"timestamp_window,omitempty"`
	// RejectStatus is what the carrier expects for a refused push (default
	// 401); some carriers retry on anything but a 4xx they know.
	RejectStatus int `json:"reject_status,omitempty"`
	// PullURL is the base of the carrier's query API; APIKey its key.
	PullURL string `json:"pull_url,omitempty"`
	APIKey  string `json:"api_key,omitempty"`
	// Quota is the carrier's limit on queries per second; RealtimeShare and
	// BackfillShare split it (their sum must not exceed it).
	Quota         float64 `json:"quota"`
	RealtimeShare float64 `json:"realtime_share"`
	BackfillShare float64 `json:"backfill_share"`
	// QuotaMargin is kept unused of each share (default 0.05: 5%), so that
	// the varying delay between our claim and the carrier's meter rarely
	// puts more than the share into one of the carrier's one-second
	// windows. What holds the limit is the carrier's meter (a query past it
	// is answered 429 and waits its Retry-After, not counted as a failure);
	// the margin only keeps those answers rare.
	QuotaMargin float64 `json:"quota_margin,omitempty"`
	// MaxConcurrent caps queries in flight per share (default 16).
	MaxConcurrent int `json:"max_concurrent,omitempty"`
	// Timeout bounds one query (default 5s).
	Timeout Duration `json:"timeout,omitempty"`
	// BreakerFailures consecutive failures open a share's breaker for
	// BreakerCooldown, after which BreakerProbes probes decide (defaults 5,
	// 30s, 1).
	BreakerFailures int      `json:"breaker_failures,omitempty"`
	BreakerCooldown Duration `json:"breaker_cooldown,omitempty"`
	BreakerProbes   int      `json:"breaker_probes,omitempty"`
	// Sequenced: the carrier promises a per-waybill source sequence.
	Sequenced bool `json:"sequenced"`
	// Zone is the carrier's local time zone for times sent without an
	// offset; ZoneTrusted says such times may order events.
	Zone        string `json:"zone,omitempty"`
	ZoneTrusted bool   `json:"zone_trusted,omitempty"`
	// VolatileFields are left out of the payload digest (default
	// DefaultVolatileFields).
	VolatileFields []string `json:"volatile_fields,omitempty"`
	// Codes is the initial mapping (version 1) of the carrier's codes.
	Codes map[string]Milestone `json:"codes"`

	// loc is Zone loaded once by WithDefaults: loading a zone reads the
	// zone database, which cost a fifth of ingestion's CPU per event.
	loc *time.Location
}

// Duration is a time.Duration written as "30s" in configuration.
type Duration time.Duration

// UnmarshalText reads "30s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

var carrierCodeRE = regexp.MustCompile(`^[a-z0-9_-]{2,32}$`)

// Defaults of Carrier fields.
const (
	DefaultSignatureHeader = "X-Tracking-Signature"
	DefaultTimestampHeader = "X-Tracking-Timestamp"
	DefaultTimestampWindow = 5 * time.Minute
	DefaultMaxConcurrent   = 16
	DefaultQuotaMargin     = 0.05
	DefaultTimeout         = 5 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
	DefaultBreakerProbes   = 1
)

// WithDefaults fills defaults and validates, naming the wrong field.
func (c Carrier) WithDefaults() (Carrier, error) {
	bad := func(format string, args ...any) (Carrier, error) {
		return c, fmt.Errorf("carrier %q: %s", c.Code, fmt.Sprintf(format, args...))
	}
	if !carrierCodeRE.MatchString(c.Code) {
		return bad("code must be 2-32 of a-z 0-9 _ -")
	}
	if c.NameZH == "" {
		c.NameZH = c.Code
	}
	if c.NameEN == "" {
		c.NameEN = c.Code
	}
	if len(c.Secrets) == 0 {
		return bad("secrets: at least one webhook secret is required")
	}
	for i, s := range c.Secrets {
		if len(s) < 16 {
			return bad("secrets[%d] is shorter than 16 bytes", i)
		}
	}
	c.SignatureHeader = or(c.SignatureHeader, DefaultSignatureHeader)
	c.TimestampHeader = or(c.TimestampHeader, DefaultTimestampHeader)
	if c.TimestampWindow == 0 {
		c.TimestampWindow = Duration(DefaultTimestampWindow)
	}
	if c.RejectStatus == 0 {
		c.RejectStatus = http.StatusUnauthorized
	}
	if c.RejectStatus < 400 || c.RejectStatus > 499 {
		return bad("reject_status must be a 4xx status")
	}
	if c.PullURL != "" {
		if u, err := url.Parse(c.PullURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("pull_url must be an http(s) URL")
		}
	}
	if c.Quota <= 0 || c.RealtimeShare <= 0 || c.BackfillShare <= 0 {
		return bad("quota, realtime_share and backfill_share must be positive")
	}
	if c.RealtimeShare+c.BackfillShare > c.Quota+1e-9 {
		return bad("realtime_share %v + backfill_share %v exceed the quota %v", c.RealtimeShare, c.BackfillShare, c.Quota)
	}
	if c.QuotaMargin == 0 {
		c.QuotaMargin = DefaultQuotaMargin
	}
	if c.QuotaMargin < 0 || c.QuotaMargin > 0.5 {
		return bad("quota_margin must be 0..0.5")
	}
	c.MaxConcurrent = orInt(c.MaxConcurrent, DefaultMaxConcurrent)
	if c.Timeout == 0 {
		c.Timeout = Duration(DefaultTimeout)
	}
	c.BreakerFailures = orInt(c.BreakerFailures, DefaultBreakerFailures)
	if c.BreakerCooldown == 0 {
		c.BreakerCooldown = Duration(DefaultBreakerCooldown)
	}
	c.BreakerProbes = orInt(c.BreakerProbes, DefaultBreakerProbes)
	if c.Zone == "" {
		c.Zone = "UTC"
	}
	loc, err := time.LoadLocation(c.Zone)
	if err != nil {
		return bad("zone %q is not a time zone name", c.Zone)
	}
	c.loc = loc
	if c.VolatileFields == nil {
		c.VolatileFields = DefaultVolatileFields
	}
	m := Mapping{Carrier: c.Code, Version: 1, Codes: c.Codes}
	if err := m.Validate(); err != nil {
		return bad("codes: %v", err)
	}
	return c, nil
}

// Location is the carrier's zone.
func (c *Carrier) Location() *time.Location {
	if c.loc != nil {
		return c.loc
	}
	loc, err := time.LoadLocation(c.Zone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// Rate is the rate our claims take of a share: the share less the margin.
func (c *Carrier) Rate(share float64) float64 { return share * (1 - c.QuotaMargin) }

// Flow keys of a carrier's two shares.
func (c *Carrier) RealtimeKey() string { return "carrier:" + c.Code + ":realtime" }
func (c *Carrier) BackfillKey() string { return "carrier:" + c.Code + ":backfill" }

// Name is the carrier's name in the operator's language.
func (c *Carrier) Name(lang string) string {
	if lang == "en" {
		return c.NameEN
	}
	return c.NameZH
}

// ValidateCarriers checks a set: each valid, codes unique.
func ValidateCarriers(cs []Carrier) ([]Carrier, error) {
	if len(cs) == 0 {
		return nil, errors.New("no carriers configured")
	}
	seen := map[string]bool{}
	out := make([]Carrier, 0, len(cs))
	for _, c := range cs {
		c, err := c.WithDefaults()
		if err != nil {
			return nil, err
		}
		if seen[c.Code] {
			return nil, fmt.Errorf("carrier %q configured twice", c.Code)
		}
		seen[c.Code] = true
		out = append(out, c)
	}
	return out, nil
}

var waybillRE = regexp.MustCompile(`^[A-Za-z0-9-]{4,40}$`)

// ValidWaybill reports whether s is a waybill number we accept: 4-40 of
// A-Z a-z 0-9 and '-'.
func ValidWaybill(s string) bool { return waybillRE.MatchString(s) }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
