package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKeelLatencyCauses runs a short Keel latency run with the breakdown on
// and checks that every job was traced, that the segments are printed, and
// that the database's wait events were sampled. It makes no claim about
// speed.
func TestKeelLatencyCauses(t *testing.T) {
	url := needDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cfg := &runConfig{DatabaseURL: url, Mode: "latency", Duration: time.Second, Rate: 200, Workers: 20, Causes: &out}
	if _, err := runKeel(ctx, cfg); err != nil {
		t.Fatalf("keel: %v", err)
	}
	report := out.String()
	m := regexp.MustCompile(`causes: (\d+) jobs traced`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("no traced count in the report:\n%s", report)
	}
	if n, _ := strconv.Atoi(m[1]); n != 200 {
		t.Errorf("traced %d jobs, want the 200 offered:\n%s", n, report)
	}
	for _, want := range []string{"enqueue→start", "insert", "claim wait", "claim and start", "at or above p99", "GC:", "database backends sampled"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
