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
	// old. Default: one period, and never less than ten leader leases, so a
	// failover (normally about one lease) or a loaded leader losing its lease
	// a few times in a row loses no tick. Repeated inserts of a tick are
	// absorbed by its idempotency key.
	CatchUp time.Duration
}

// catchUpWindow is how far back missed ticks are still inserted.
func (p *PeriodicJob) catchUpWindow(now time.Time) time.Duration {
	if p.CatchUp > 0 {
		return p.CatchUp
	}
	next := p.Schedule.Next(now)
	return p.Schedule.Next(next).Sub(next)
}

// maxCatchUpTicks bounds the ticks of one catch-up window, so a tiny
// interval with a long CatchUp cannot flood the queue after an outage. It
// only ever drops ticks older than the window allows: a leader that merely
// runs late inserts every tick since its last one.
const maxCatchUpTicks = 10000

// dueTicks returns the ticks after since (or, when since is zero, within the
// catch-up window, at least minWindow) up to now, oldest first. A late
// scheduler loop therefore inserts every tick it overslept, and a new leader
// the ticks of the failover gap (minWindow covers it).
func (p *PeriodicJob) dueTicks(since, now time.Time, minWindow time.Duration) []time.Time {
	from := now.Add(-max(p.catchUpWindow(now), minWindow) - time.Nanosecond)
	if since.After(from) {
		from = since
	}
	var ticks []time.Time
	for t := p.Schedule.Next(from); !t.After(now); t = p.Schedule.Next(t) {
		ticks = append(ticks, t)
	}
	if len(ticks) > maxCatchUpTicks {
		ticks = ticks[len(ticks)-maxCatchUpTicks:]
	}
	return ticks
}
