package reservation

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxBands bounds a category's time bands.
const maxBands = 24

// Band gives reservations starting within [From, To) of the business day
// (local time in the business zone) their own grace minutes: peak hours a
// short grace, quiet hours a long one. A band whose To is before its From
// wraps past midnight.
type Band struct {
	From         string `json:"from"`
	To           string `json:"to"`
	GraceMinutes int    `json:"grace_minutes"`
}

// bandRange is a band in minutes of the day.
type bandRange struct{ from, to, grace int }

func (b bandRange) contains(minute int) bool {
	if b.from < b.to {
		return minute >= b.from && minute < b.to
	}
	return minute >= b.from || minute < b.to
}

// ParseBands reads the stored form "HH:MM-HH:MM=N,HH:MM-HH:MM=N"
// (empty: no bands).
func ParseBands(s string) ([]Band, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	bands := make([]Band, 0, len(parts))
	for _, p := range parts {
		b, err := parseBand(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		bands = append(bands, b)
	}
	if err := ValidateBands(bands); err != nil {
		return nil, err
	}
	return bands, nil
}

func parseBand(p string) (Band, error) {
	span, grace, ok := strings.Cut(p, "=")
	if !ok {
		return Band{}, fmt.Errorf("band %q: want HH:MM-HH:MM=minutes", p)
	}
	from, to, ok := strings.Cut(span, "-")
	if !ok {
		return Band{}, fmt.Errorf("band %q: want HH:MM-HH:MM=minutes", p)
	}
	n, err := strconv.Atoi(strings.TrimSpace(grace))
	if err != nil {
		return Band{}, fmt.Errorf("band %q: grace minutes: %w", p, err)
	}
	return Band{From: strings.TrimSpace(from), To: strings.TrimSpace(to), GraceMinutes: n}, nil
}

// FormatBands is the stored form of bands (the inverse of ParseBands).
func FormatBands(bands []Band) string {
	parts := make([]string, len(bands))
	for i, b := range bands {
		parts[i] = fmt.Sprintf("%s-%s=%d", b.From, b.To, b.GraceMinutes)
	}
	return strings.Join(parts, ",")
}

// ValidateBands checks each band's clock times and minutes and that no two
// bands overlap (so which band applies never depends on their order).
func ValidateBands(bands []Band) error {
	if len(bands) > maxBands {
		return fmt.Errorf("at most %d bands", maxBands)
	}
	var taken [24 * 60]bool
	for _, b := range bands {
		r, err := b.rangeOf()
		if err != nil {
			return err
		}
		for m := 0; m < 24*60; m++ {
			if !r.contains(m) {
				continue
			}
			if taken[m] {
				return fmt.Errorf("band %s-%s overlaps another band", b.From, b.To)
			}
			taken[m] = true
		}
	}
	return nil
}

func (b Band) rangeOf() (bandRange, error) {
	from, err := clockMinute(b.From)
	if err != nil {
		return bandRange{}, err
	}
	to, err := clockMinute(b.To)
	if err != nil {
		return bandRange{}, err
	}
	if from == to {
		return bandRange{}, fmt.Errorf("band %s-%s is empty", b.From, b.To)
	}
	if b.GraceMinutes < 0 || b.GraceMinutes > 1440 {
		return bandRange{}, fmt.Errorf("band %s-%s: grace minutes must be 0..1440", b.From, b.To)
	}
	return bandRange{from: from, to: to, grace: b.GraceMinutes}, nil
}

// clockMinute parses "HH:MM" (00:00..23:59, or 24:00 as the end of the day)
// into minutes of the day.
func clockMinute(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("time %q: want HH:MM", s)
	}
	h, err1 := strconv.Atoi(s[:2])
	m, err2 := strconv.Atoi(s[3:])
	if err1 != nil || err2 != nil || s[0] == '+' || s[0] == '-' || s[3] == '+' || s[3] == '-' ||
		h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("time %q: want HH:MM between 00:00 and 24:00", s)
	}
	return (h*60 + m) % (24 * 60), nil
}

// graceFor returns the grace minutes for a reservation starting at start:
// the band containing start's local time of day in zone, else the
// category's default.
func graceFor(c *Category, start time.Time, zone *time.Location) int {
	local := start.In(zone)
	minute := local.Hour()*60 + local.Minute()
	for _, b := range c.Bands {
		r, err := b.rangeOf()
		if err == nil && r.contains(minute) {
			return r.grace
		}
	}
	return c.GraceMinutes
}
