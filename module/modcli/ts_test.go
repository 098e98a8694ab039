package modcli

import (
	"errors"
	"testing"
	"time"
)

// TestTSNamesTheZone: every time the CLI prints says which zone it is in,
// by offset, in the operator's local zone.
func TestTSNamesTheZone(t *testing.T) {
	at := time.Date(2026, 12, 3, 14, 21, 52, 0, time.UTC)
	saved := time.Local
	t.Cleanup(func() { time.Local = saved })
	for _, c := range []struct {
		loc  *time.Location
		want string
	}{
		{time.UTC, "2026-12-03 14:21:52 UTC"},
		{time.FixedZone("CST", 8*3600), "2026-12-03 22:21:52 UTC+8"},
		{time.FixedZone("NST", -(3*3600 + 30*60)), "2026-12-03 10:51:52 UTC-3:30"},
		{time.FixedZone("IST", 5*3600+30*60), "2026-12-03 19:51:52 UTC+5:30"},
	} {
		time.Local = c.loc
		if got := TS(at); got != c.want {
			t.Errorf("TS in %s = %q, want %q", c.loc, got, c.want)
		}
		if got := OptTS(&at); got != c.want {
			t.Errorf("OptTS in %s = %q, want %q", c.loc, got, c.want)
		}
	}
	if got := OptTS(nil); got != "-" {
		t.Errorf("OptTS(nil) = %q", got)
	}
}

type problem struct{ code string }

func (p *problem) Error() string       { return "terse detail (" + p.code + ")" }
func (p *problem) ProblemCode() string { return p.code }

// TestNotFoundIsASentence: the engine's and the modules' not-found codes
// read as "no <what> <id> (<code>)", with the problem still wrapped; other errors
// pass through.
func TestNotFoundIsASentence(t *testing.T) {
	for _, code := range []string{"not_found", "payment_not_found", "delivery_not_found"} {
		p := &problem{code}
		err := NotFound("payment", "NOPE000001", p)
		if err.Error() != "no payment NOPE000001 ("+code+")" {
			t.Errorf("%s: %q", code, err)
		}
		var got *problem
		if !errors.As(err, &got) || got != p {
			t.Errorf("%s: the problem is not wrapped", code)
		}
	}
	other := &problem{"invalid_argument"}
	if err := NotFound("payment", "x", other); err != other {
		t.Errorf("invalid_argument became %v", err)
	}
	if err := NotFound("payment", "x", nil); err != nil {
		t.Errorf("nil became %v", err)
	}
}
