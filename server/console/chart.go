package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// A chart the operator can read: a y axis with ticks and its unit, a time
// axis with ticks in the console's zone (named under the axis), the
// sampling interval stated under the chart, and each sample's values on
// hover (an SVG <title> per sample column, which the browser shows as a
// tooltip; no script needed under the console's CSP).

// series is one line of a chart.
type series struct {
	Name  string
	Class string // s1, s2, s3: the line's colour
	V     []float64
}

// chartSpec is what drawChart draws: one value per series per time.
type chartSpec struct {
	Lang   string
	Label  string // aria-label
	Unit   string // the y axis's unit in words ("个任务", "秒")
	Times  []time.Time
	Series []series
	Every  time.Duration
	Small  bool // a home number's trend: shorter
}

// niceStep is a round tick step (1, 2 or 5 times a power of ten) that
// splits top into about n intervals.
func niceStep(top float64, n int) float64 {
	if top <= 0 {
		return 1
	}
	raw := top / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// num shows a value without needless decimals.
func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%.0f", f)
	}
	if math.Abs(f) >= 100 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.2g", f)
}

// everyWords says the sampling interval and what is kept.
func everyWords(lang string, every time.Duration) string {
	keep := every * maxSamples
	if lang == langEN {
		return fmt.Sprintf("Sampled every %s by this process, the last %s kept (%d points); times in %s.",
			durWords(lang, every), durWords(lang, keep), maxSamples, zoneWords(lang))
	}
	return fmt.Sprintf("本进程每 %s采样一次，保留最近 %s（%d 个点）；时间为%s。", durWords(lang, every), durWords(lang, keep), maxSamples, zoneWords(lang))
}

// durWords says a duration in the operator's words ("10 秒", "1 小时").
func durWords(lang string, d time.Duration) string {
	unit := func(n float64, zh, en string) string {
		if lang == langEN {
			return num(n) + " " + en
		}
		return num(n) + " " + zh
	}
	switch {
	case d >= time.Hour && d%(time.Hour/10) == 0:
		return unit(d.Hours(), "小时", "h")
	case d >= time.Minute && d%time.Second == 0:
		return unit(d.Minutes(), "分钟", "min")
	case d >= time.Second:
		return unit(d.Seconds(), "秒", "s")
	}
	return unit(float64(d.Milliseconds()), "毫秒", "ms")
}

// zoneWords names the zone times are shown in.
func zoneWords(lang string) string {
	if lang == langEN {
		return "Beijing time (UTC+8)"
	}
	return "北京时间（UTC+8）"
}

func drawChart(c chartSpec) template.HTML {
	if len(c.Times) < 2 {
		return template.HTML(`<p class="muted">` + template.HTMLEscapeString(word(c.Lang, "no_samples")) + `</p>`)
	}
	w, h := 480.0, 200.0
	if c.Small {
		h = 150
	}
	const left, right, top, bottom = 52.0, 12.0, 24.0, 40.0
	pw, ph := w-left-right, h-top-bottom
	hi, whole := 0.0, true
	for _, s := range c.Series {
		for _, v := range s.V {
			hi = max(hi, v)
			whole = whole && v == math.Trunc(v)
		}
	}
	step := niceStep(hi, 4)
	if whole {
		// Counts have whole ticks.
		step = math.Max(step, 1)
	}
	ymax := math.Max(step, math.Ceil(hi/step)*step)
	n := len(c.Times)
	x := func(i int) float64 { return left + pw*float64(i)/float64(n-1) }
	y := func(v float64) float64 { return top + ph - ph*v/ymax }
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, w, h, esc(c.Label))
	// Y axis: grid lines and ticks, the unit above.
	for v := 0.0; v <= ymax+step/2; v += step {
		fmt.Fprintf(&b, `<line class="grid" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/><text class="tick" x="%.0f" y="%.1f" text-anchor="end">%s</text>`,
			left, y(v), w-right, y(v), left-6, y(v)+3, esc(num(v)))
	}
	fmt.Fprintf(&b, `<text class="unit" x="4" y="11">%s</text>`, esc(c.Unit))
	// Time axis: about five ticks, the zone under it.
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/>`, left, top+ph, w-right, top+ph)
	ticks := min(5, n)
	for k := range ticks {
		i := k * (n - 1) / max(1, ticks-1)
		anchor := "middle"
		if k == 0 {
			anchor = "start"
		} else if k == ticks-1 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><text class="tick" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`,
			x(i), top+ph, x(i), top+ph+4, x(i), top+ph+15, anchor, c.Times[i].In(beijing).Format("15:04:05"))
	}
	fmt.Fprintf(&b, `<text class="tick zone" x="%.0f" y="%.0f" text-anchor="end">%s</text>`, w-right, h-4, esc(word(c.Lang, "time_axis")))
	for _, s := range c.Series {
		var pts []string
		for i, v := range s.V {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		fmt.Fprintf(&b, `<polyline class="%s" fill="none" stroke-width="2" points="%s"/>`, s.Class, strings.Join(pts, " "))
	}
	// Hover: one transparent column per sample with its values.
	colW := pw / float64(n-1)
	for i, t := range c.Times {
		var parts []string
		for _, s := range c.Series {
			name := s.Name
			if name != "" {
				name += " "
			}
			parts = append(parts, name+num(s.V[i])+" "+c.Unit)
		}
		fmt.Fprintf(&b, `<rect class="hover" x="%.1f" y="%.0f" width="%.1f" height="%.0f"><title>%s %s · %s</title></rect>`,
			x(i)-colW/2, top, colW, ph, t.In(beijing).Format("2006-01-02 15:04:05"), "UTC+8", esc(strings.Join(parts, "，")))
	}
	b.WriteString(`</svg>`)
	fmt.Fprintf(&b, `<p class="muted every">%s</p>`, esc(everyWords(c.Lang, c.Every)))
	return template.HTML(b.String())
}

// chart draws one of the overview's charts from the engine's samples.
func chart(v *view, d *overviewData, which string) template.HTML {
	c := chartSpec{Lang: v.Lang, Label: word(v.Lang, which), Every: d.Every}
	var a, f, bl, age []float64
	for _, s := range d.Samples {
		c.Times = append(c.Times, s.At)
		a, f = append(a, s.Completed), append(f, s.Failed)
		bl, age = append(bl, float64(s.Backlog)), append(age, s.OldestAge)
	}
	switch which {
	case "throughput":
		c.Unit = fmt.Sprintf(word(v.Lang, "unit_jobs_per"), durWords(v.Lang, d.Every))
		c.Series = []series{{Name: word(v.Lang, "completed"), Class: "s1", V: a}, {Name: word(v.Lang, "failures"), Class: "s2", V: f}}
	case "oldest":
		c.Unit = word(v.Lang, "unit_seconds")
		c.Series = []series{{Class: "s3", V: age}}
	default:
		c.Unit = word(v.Lang, "unit_jobs")
		c.Series = []series{{Class: "s3", V: bl}}
	}
	return drawChart(c)
}

// trendChart draws a home number's samples.
func trendChart(lang, label, unit string, pts []point, every time.Duration) template.HTML {
	c := chartSpec{Lang: lang, Label: label, Unit: unit, Every: every, Small: true}
	s := series{Class: "s3"}
	for _, p := range pts {
		c.Times = append(c.Times, p.At)
		s.V = append(s.V, p.V)
	}
	c.Series = []series{s}
	return drawChart(c)
}
