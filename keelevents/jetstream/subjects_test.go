package jetstream

import (
	"fmt"
	"testing"
)

func TestSubjects(t *testing.T) {
	for _, tc := range []struct {
		topic string
		p     int
		want  string
	}{
		{"payment", 3, "keel.ev.payment.3"},
		{"payment.succeeded", 0, "keel.ev.payment.0.succeeded"},
		{"payment.refund.done", 15, "keel.ev.payment.15.refund.done"},
	} {
		if got := newNames("").subject(tc.topic, tc.p); got != tc.want {
			t.Errorf("subject(%q, %d) = %q, want %q", tc.topic, tc.p, got, tc.want)
		}
	}
	for _, tc := range []struct {
		filter string
		p      int
		want   string
	}{
		{"payment", -1, "keel.ev.payment.*"},
		{"payment.>", -1, "keel.ev.payment.*.>"},
		{"payment.refund.>", 2, "keel.ev.payment.2.refund.>"},
		{"payment.succeeded", 1, "keel.ev.payment.1.succeeded"},
	} {
		f, err := parseFilter(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := newNames("").filterSubject(f, tc.p); got != tc.want {
			t.Errorf("filter %q partition %d = %q, want %q", tc.filter, tc.p, got, tc.want)
		}
	}
	if n := newNames("shop"); n.subject("payment.ok", 2) != "shop.ev.payment.2.ok" || n.streamName("payment") != "SHOP_PAYMENT" {
		t.Errorf("namespace shop: %q in %q", n.subject("payment.ok", 2), n.streamName("payment"))
	}
	for _, bad := range []string{"", ">", "Payment", "a..b", "a.>.b", "a.*", "a b"} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("filter %q accepted", bad)
		}
	}
}

func TestNormalizeFilters(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"a.b", "a.>"}, "[a.>]"},
		{[]string{"a", "a.>"}, "[a a.>]"}, // "a.>" does not match "a"
		{[]string{"a.b.>", "a.b.c", "a.b"}, "[a.b.> a.b]"},
		{[]string{"a.>", "a.>"}, "[a.>]"},
		{[]string{"a.b", "c.b", "a.bc"}, "[a.b c.b a.bc]"},
		{[]string{"a.b.>", "a.>"}, "[a.>]"},
	} {
		fs, err := normalizeFilters(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range fs {
			got = append(got, f.topic)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("normalizeFilters(%v) = %v, want %s", tc.in, got, tc.want)
		}
	}
}
