package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// testURL is KEEL_TEST_DATABASE_URL, or the local default server.
func testURL() string {
	if v := os.Getenv("KEEL_TEST_DATABASE_URL"); v != "" {
		return v
	}
	return defaultDatabaseURL
}

// testPoolConns caps each pool a test opens. The tests run in parallel,
// each on schemas of its own, and one run opens a pool per engine (Keel's
// default is 20 connections): uncapped, six at once on a many-core machine
// would pass the 100 connections of a default PostgreSQL.
const testPoolConns = "8"

// needDB skips the test under -short, marks it parallel, and fails it when
// the database cannot be reached (scripts/test.sh provides one). The URL it
// returns caps pools at testPoolConns unless it sets pool_max_conns itself,
// which also keeps the program's single connections (checkpoint, the
// header, Watermill's schema) honest about pool_ parameters.
func needDB(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	t.Parallel()
	url := testURL()
	if !strings.Contains(url, "pool_max_conns") {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + "pool_max_conns=" + testPoolConns
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := openPool(ctx, url)
	if err != nil {
		t.Fatalf("PostgreSQL at KEEL_TEST_DATABASE_URL (or %s): %v", defaultDatabaseURL, err)
	}
	pool.Close()
	return url
}

// TestDrainBoth runs a tiny drain of each engine and checks that every job
// was worked. It makes no claim about speed.
func TestDrainBoth(t *testing.T) {
	url := needDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := &runConfig{DatabaseURL: url, Mode: "drain", N: 2000, Workers: 20}

	k, err := runKeel(ctx, cfg)
	if err != nil {
		t.Fatalf("keel: %v", err)
	}
	if k.Jobs != cfg.N || k.JobsPerSec <= 0 {
		t.Errorf("keel: %s; want %d jobs", k, cfg.N)
	}

	// runRiver itself checks that N jobs were worked and N rows completed.
	r, err := runRiver(ctx, cfg, riverTuned)
	if err != nil {
		t.Fatalf("river: %v", err)
	}
	if r.Jobs != cfg.N || r.JobsPerSec <= 0 {
		t.Errorf("river: %s; want %d jobs", r, cfg.N)
	}
}

// TestRiverLatencyAndContinuous runs River's other two modes briefly: every
// offered job is started and timed, and continuous work completes jobs.
func TestRiverLatencyAndContinuous(t *testing.T) {
	url := needDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	lat, err := runRiver(ctx, &runConfig{DatabaseURL: url, Mode: "latency", Duration: time.Second, Rate: 200, Workers: 10}, riverTuned)
	if err != nil {
		t.Fatalf("latency: %v", err)
	}
	if lat.Jobs != 200 || lat.P50 <= 0 || lat.P50 > lat.P99 || lat.P99 > lat.Max {
		t.Errorf("latency: %s; want 200 jobs with ordered percentiles", lat)
	}

	cont, err := runRiver(ctx, &runConfig{DatabaseURL: url, Mode: "continuous", Duration: time.Second, Workers: 10}, riverTuned)
	if err != nil {
		t.Fatalf("continuous: %v", err)
	}
	if cont.Jobs <= 0 {
		t.Errorf("continuous: %s; want some jobs worked", cont)
	}
}

// TestRunPrintsSummary runs the whole program on a tiny drain, one round,
// and checks the closing lines.
func TestRunPrintsSummary(t *testing.T) {
	url := needDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := parseFlags([]string{"--database-url", url, "-n", "500", "--workers", "10", "--rounds", "1"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	if strings.Contains(s, "database unreachable") {
		t.Errorf("the header could not describe the database (%s):\n%s", url, s)
	}
	for _, want := range []string{"round 1/1 keel  drain: 500 jobs", "round 1/1 river drain: 500 jobs", "peers: drain keel ", "(median of 1)", "river (defaults) ",
		"| mode | Keel | River (or peer) |", "| drain (jobs/s) | ", "| drain, River defaults (jobs/s) | "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "sprint"},
		{"--rounds", "0"},
		{"--workers", "0"},
		{"extra"},
		{"--only", "sidekiq"},
		{"--mode", "sqlite"},
	} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

func TestQuantileAndMedian(t *testing.T) {
	s := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]time.Duration{0.5: 5, 0.9: 9, 0.99: 10, 1: 10, 0: 1} {
		if got := quantile(s, q); got != want {
			t.Errorf("quantile(%v) = %d, want %d", q, got, want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile(nil) = %d", got)
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
}

// TestSQLiteDrainBothEngines drains a few jobs with Keel's SQLite driver
// and River's riversqlite, one round, and checks both ran all of them.
func TestSQLiteDrainBothEngines(t *testing.T) {
	url := needDB(t) // the header line still describes the PostgreSQL server
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := parseFlags([]string{"--database-url", url, "--mode", "sqlite-drain", "-n", "300", "--workers", "10",
		"--rounds", "1", "--river-defaults=false"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"round 1/1 keel  sqlite-drain: 300 jobs", "round 1/1 river sqlite-drain: 300 jobs", "| sqlite-drain (jobs/s) | "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestTableRows(t *testing.T) {
	ms := time.Millisecond
	lat := &modeSummary{Mode: "latency",
		Keel:  []*Result{{Mode: "latency", P50: 2 * ms, P99: 10 * ms}, {Mode: "latency", P50: 2 * ms, P99: 30 * ms}},
		River: []*Result{{Mode: "latency", P50: 4 * ms, P99: 20 * ms}, {Mode: "latency", P50: 2 * ms, P99: 20 * ms}}}
	drain := &modeSummary{Mode: "drain",
		Keel:  []*Result{{JobsPerSec: 300}, {JobsPerSec: 100}},
		River: []*Result{{JobsPerSec: 100}, {JobsPerSec: 100}}}
	var out bytes.Buffer
	writeTable(&out, []*modeSummary{drain, lat})
	s := out.String()
	for _, want := range []string{
		"| drain (jobs/s) | 200 | 100 | 2.00× (worst 1.00×) | 2 |",
		"| latency p50 (ms, lower is better) | 2.00 | 3.00 | 0.75× (worst 1.00×) | 2 |",
		"| latency p99 (ms, lower is better) | 20.00 | 20.00 | 1.00× (worst 1.50×) | 2 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}
