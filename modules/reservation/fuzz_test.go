package reservation

import (
	"reflect"
	"testing"
	"time"
)

// FuzzParseBands: any accepted band list formats back to itself, never
// overlaps, and gives every minute of the day at most one grace.
func FuzzParseBands(f *testing.F) {
	for _, s := range []string{"", "11:00-13:00=5", "22:00-08:00=20,11:00-13:00=5", "00:00-24:00=3",
		"11:00-13:00=5,12:00-14:00=1", "24:00-01:00=0", " 09:30 - 10:00 = 7 ", "9:00-10:00=5", "11:00-11:00=5",
		"11:00-13:00=-1", "11:00-13:00=+5", "ab:cd-ef:gh=1", "11:00=5", "-=", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		bands, err := ParseBands(s)
		if err != nil {
			return
		}
		again, err := ParseBands(FormatBands(bands))
		if err != nil || !reflect.DeepEqual(again, bands) {
			t.Fatalf("%q: round trip %q gave %v, %v", s, FormatBands(bands), again, err)
		}
		c := &Category{GraceMinutes: 9999, Bands: bands}
		for minute := 0; minute < 24*60; minute += 7 {
			at := time.Date(2030, 1, 7, minute/60, minute%60, 0, 0, time.UTC)
			if g := graceFor(c, at, time.UTC); g < 0 || (g > 1440 && g != 9999) {
				t.Fatalf("%q: grace %d at %s", s, g, at)
			}
		}
	})
}

// FuzzDecodeCursor: only cursors this module issued decode, and they decode
// to what was encoded.
func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{"", encodeCursor(1), encodeCursor(1 << 40), "cnN2OjA", "cnN2Oi0x", "bm9wZQ", "cnN2OjAx", "%%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := decodeCursor(s)
		if !ok {
			return
		}
		if id < 1 || encodeCursor(id) != s {
			t.Fatalf("%q decoded to %d, which encodes as %q", s, id, encodeCursor(id))
		}
	})
}

// FuzzParseSettings: settings either parse into values within their bounds
// or are refused.
func FuzzParseSettings(f *testing.F) {
	f.Add("page_size", "200", "tx_size", "20")
	f.Add("scan_interval", "30s", "zone", "Asia/Shanghai")
	f.Add("tx_size", "500", "page_size", "10")
	f.Add("zone", "../../etc/passwd", "async_commit", "maybe")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		s, err := parseSettings(map[string]string{"reservation." + k1: v1, "reservation." + k2: v2})
		if err != nil {
			return
		}
		if s.pageSize < 1 || s.txSize < 1 || s.txSize > s.pageSize || s.scanInterval < time.Second || s.zone == nil {
			t.Fatalf("accepted out-of-bounds settings: %+v", s)
		}
	})
}
