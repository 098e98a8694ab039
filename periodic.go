package keel

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule yields the tick times of a periodic job. Ticks must be a pure
// function of time so that every instance computes the same ones: the tick
// is the job's idempotency key, which is what makes it fire once per tick
// across any number of instances and leader changes.
type Schedule interface {
	// Next returns the first tick strictly after t.
	Next(t time.Time) time.Time
}

// Every is a schedule ticking at multiples of d since the Unix epoch.
func Every(d time.Duration) Schedule { return everySchedule{d: d} }

type everySchedule struct{ d time.Duration }

func (e everySchedule) Next(t time.Time) time.Time {
	if e.d <= 0 {
		return t.Add(time.Hour)
	}
	return t.Truncate(e.d).Add(e.d)
}

// Cron parses a standard 5-field cron expression (or a descriptor such as
// "@hourly"), evaluated in loc (nil = UTC).
func Cron(expr string, loc *time.Location) (Schedule, error) {
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("parsing cron expression %q: %w", expr, err)
	}
	if loc == nil {
		loc = time.UTC
	}
	return cronSchedule{s: sched, loc: loc}, nil
}

type cronSchedule struct {
	s   cron.Schedule
	loc *time.Location
}

func (c cronSchedule) Next(t time.Time) time.Time { return c.s.Next(t.In(c.loc)) }

// PeriodicJob is a job inserted on every tick of its schedule.
type PeriodicJob struct {
	// Name is stable across deploys; with the tick it forms the idempotency
	// key "periodic:<Name>:<tick>".
	Name string
	// Schedule yields the ticks.
	Schedule Schedule
	// Construct builds the job for one tick.
	Construct func(tick time.Time) (JobArgs, *InsertOpts)
	// CatchUp inserts a tick missed while no leader ran if it is at most this
	// old. Default: one period (so a failover loses no tick).
	CatchUp time.Duration
}

// lastTick returns the latest tick at or before now, or zero if it is older
// than the catch-up window.
func (p *PeriodicJob) lastTick(now time.Time) time.Time {
	next := p.Schedule.Next(now)
	window := p.CatchUp
	if window <= 0 {
		window = p.Schedule.Next(next).Sub(next)
	}
	// Walk forward from the start of the window: schedules only go forward.
	var last time.Time
	for t := p.Schedule.Next(now.Add(-window - time.Nanosecond)); !t.After(now); t = p.Schedule.Next(t) {
		last = t
	}
	return last
}
