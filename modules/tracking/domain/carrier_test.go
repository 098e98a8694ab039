package domain

import (
	"strings"
	"testing"
	"time"
)

func TestDemoCarriersValid(t *testing.T) {
	cs, err := ValidateCarriers(DemoCarriers())
	if err != nil || len(cs) != 3 {
		t.Fatalf("demo carriers: %d %v", len(cs), err)
	}
	for _, c := range cs {
		if c.RealtimeShare+c.BackfillShare > c.Quota || c.SignatureHeader == "" || c.RejectStatus == 0 || c.Timeout == 0 {
			t.Errorf("%s: defaults not filled: %+v", c.Code, c)
		}
	}
	if cs[0].RealtimeKey() != "carrier:cnhub:realtime" || cs[0].BackfillKey() != "carrier:cnhub:backfill" {
		t.Errorf("flow keys: %s %s", cs[0].RealtimeKey(), cs[0].BackfillKey())
	}
}

func TestCarrierValidation(t *testing.T) {
	base := DemoCarriers()[0]
	cases := map[string]func(c *Carrier){
		"code":          func(c *Carrier) { c.Code = "Bad Code" },
		"secrets":       func(c *Carrier) { c.Secrets = nil },
		"secrets[0]":    func(c *Carrier) { c.Secrets = []string{"short"} },
		"reject_status": func(c *Carrier) { c.RejectStatus = 500 },
		"pull_url":      func(c *Carrier) { c.PullURL = "ftp://x" },
		"exceed":        func(c *Carrier) { c.BackfillShare = 250 },
		"positive":      func(c *Carrier) { c.Quota = 0 },
		"zone":          func(c *Carrier) { c.Zone = "Mars/Base" },
		"codes":         func(c *Carrier) { c.Codes = map[string]Milestone{"A": "teleported"} },
	}
	for want, mutate := range cases {
		c := base
		c.Codes = map[string]Milestone{"A": PickedUp}
		mutate(&c)
		if _, err := c.WithDefaults(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	if _, err := ValidateCarriers([]Carrier{base, base}); err == nil {
		t.Error("a carrier configured twice was accepted")
	}
}

func TestParseOccurred(t *testing.T) {
	sh, _ := time.LoadLocation("Asia/Shanghai")
	at, trusted, err := ParseOccurred("2026-12-01T10:00:00+08:00", sh, false)
	if err != nil || !trusted || !at.Equal(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("with offset: %v %v %v", at, trusted, err)
	}
	at, trusted, err = ParseOccurred("2026-12-01 10:00:00", sh, false)
	if err != nil || trusted || !at.Equal(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("local time, zone not trusted: %v %v %v", at, trusted, err)
	}
	if _, _, err := ParseOccurred("yesterday", sh, true); err == nil {
		t.Fatal("accepted garbage")
	}
}
