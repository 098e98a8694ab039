package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// writeTable prints the run's closing summary as one Markdown table that
// docs/benchmarks.md can take as it is: per mode the medians of each
// engine over the rounds, the median of the per-round ratios and the worst
// round's ratio, and how many rounds. Throughput ratios are Keel/peer
// (higher is better); latency ratios are Keel/River delay (lower is better).
func writeTable(out io.Writer, sums []*modeSummary) {
	if len(sums) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\n| mode | Keel | River (or peer) | Keel/peer ratio: median (worst round) | rounds |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, s := range sums {
		for _, row := range s.tableRows() {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
		}
	}
	fmt.Fprint(out, b.String())
}

func (s *modeSummary) tableRows() [][]string {
	n := len(s.Keel)
	rounds := fmt.Sprint(n)
	if s.Mode == "latency" {
		ms := func(rs []*Result, f func(*Result) time.Duration) float64 {
			return median(mapResults(rs, func(r *Result) float64 { return float64(f(r)) / float64(time.Millisecond) }))
		}
		p50 := func(r *Result) time.Duration { return r.P50 }
		p99 := func(r *Result) time.Duration { return r.P99 }
		r50, r99 := s.roundRatios(func(k, r *Result) float64 { return durRatio(k.P50, r.P50) }),
			s.roundRatios(func(k, r *Result) float64 { return durRatio(k.P99, r.P99) })
		rows := [][]string{
			{"latency p50 (ms, lower is better)", fmt.Sprintf("%.2f", ms(s.Keel, p50)), fmt.Sprintf("%.2f", ms(s.River, p50)),
				fmt.Sprintf("%.2f× (worst %.2f×)", median(r50), slices.Max(r50)), rounds},
			{"latency p99 (ms, lower is better)", fmt.Sprintf("%.2f", ms(s.Keel, p99)), fmt.Sprintf("%.2f", ms(s.River, p99)),
				fmt.Sprintf("%.2f× (worst %.2f×)", median(r99), slices.Max(r99)), rounds},
		}
		if d := s.RiverDefault; d != nil {
			rows = append(rows, []string{"latency p99, River defaults (ms)", fmt.Sprintf("%.2f", ms(s.Keel, p99)),
				fmt.Sprintf("%.2f", float64(d.P99)/float64(time.Millisecond)),
				fmt.Sprintf("%.2f×", durRatio(time.Duration(ms(s.Keel, p99)*float64(time.Millisecond)), d.P99)), "1"})
		}
		return rows
	}
	unit, mode := "jobs/s", s.Mode
	if s.Peer != "" {
		unit, mode = "events/s", s.Mode+" (peer: "+s.Peer+")"
	}
	jps := func(r *Result) float64 { return r.JobsPerSec }
	keel := median(mapResults(s.Keel, jps))
	ratios := s.roundRatios(func(k, r *Result) float64 { return k.JobsPerSec / r.JobsPerSec })
	rows := [][]string{{mode + " (" + unit + ")", fmt.Sprintf("%.0f", keel), fmt.Sprintf("%.0f", median(mapResults(s.River, jps))),
		fmt.Sprintf("%.2f× (worst %.2f×)", median(ratios), slices.Min(ratios)), rounds}}
	if d := s.RiverDefault; d != nil {
		rows = append(rows, []string{mode + ", River defaults (" + unit + ")", fmt.Sprintf("%.0f", keel),
			fmt.Sprintf("%.0f", d.JobsPerSec), fmt.Sprintf("%.2f×", keel/d.JobsPerSec), "1"})
	}
	return rows
}

func (s *modeSummary) roundRatios(f func(k, r *Result) float64) []float64 {
	xs := make([]float64, len(s.Keel))
	for i := range xs {
		xs[i] = f(s.Keel[i], s.River[i])
	}
	return xs
}

func mapResults(rs []*Result, f func(*Result) float64) []float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return xs
}
