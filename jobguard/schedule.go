package jobguard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock"
)

// Schedule says when a job fires. Every and Cron make one; any type with
// this method will do.
type Schedule interface {
	// Next returns the first firing strictly after t, or the zero time
	// when there is none.
	Next(t time.Time) time.Time
}

// every fires at the multiples of a period.
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Truncate(time.Duration(e)).Add(time.Duration(e)) }

func (e every) String() string { return "every " + time.Duration(e).String() }

// Every fires at each multiple of period on the wall clock (Truncate's
// boundaries: every 10 minutes is at :00, :10, ..., in UTC), so replicas
// started at different moments fire together. period is at least
// MinAtMost.
func Every(period time.Duration) (Schedule, error) {
	if period < MinAtMost {
		return nil, fmt.Errorf("jobguard: %w: period %v is below the minimum %v", sqllock.ErrInvalidOption, period, MinAtMost)
	}
	return every(period), nil
}

// cronParser reads the five standard fields (minute, hour, day of month,
// month, day of week) and the descriptors @yearly, @monthly, @weekly,
// @daily, @hourly. It is robfig/cron's, the parser Kubernetes CronJobs
// use; a cron grammar is not something to write again by hand.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron fires as the cron expression expr says, read in the time zone loc
// (nil: UTC): "30 2 * * *" with Europe/Berlin is 02:30 Berlin time, in
// winter and in summer. expr has the five standard fields, or is a
// descriptor (@daily, @hourly, ...); a CRON_TZ=Zone (or TZ=Zone) prefix
// overrides loc. @every is refused: its firings count from when each
// replica started, so replicas would not agree; use Every.
//
// On the days the clocks change, Cron does as classic (Vixie) cron. An
// expression that names its minutes and its hours (neither field holds a
// * or a ?: "30 2 * * *", "0 1,2 * * 0", "0 2-4 * * *", and every
// descriptor but @hourly) is a fixed-time job, run once per wall time:
//
//   - a time the autumn change repeats fires once, at its first
//     occurrence: 02:30 CEST in Berlin, not again at 02:30 CET;
//   - a time the spring change skips fires at the change itself: 02:30
//     on the day Berlin jumps from 02:00 to 03:00 fires at 03:00 CEST.
//     Several skipped times of one day fire once.
//
// An expression with a wildcard minute or hour ("30 * * * *",
// "*/15 2 * * *", @hourly) is a periodic job and fires at every instant
// whose wall time it matches: at both occurrences of a repeated time,
// which are apart in real time, and not at all for a skipped one.
func Cron(expr string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	spec := strings.TrimSpace(expr)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		rest, ok := strings.CutPrefix(spec, prefix)
		if !ok {
			continue
		}
		zone, fields, ok := strings.Cut(rest, " ")
		if !ok {
			return nil, fmt.Errorf("jobguard: %w: cron %q: no schedule after the time zone", sqllock.ErrInvalidOption, expr)
		}
		l, err := time.LoadLocation(zone)
		if err != nil {
			return nil, fmt.Errorf("jobguard: %w: cron %q: time zone: %v", sqllock.ErrInvalidOption, expr, err)
		}
		loc, spec = l, strings.TrimSpace(fields)
		break
	}
	if strings.HasPrefix(spec, "@every") {
		return nil, fmt.Errorf("jobguard: %w: cron %q: @every counts from each replica's start; use jobguard.Every", sqllock.ErrInvalidOption, expr)
	}
	s, err := parseCron(spec)
	if err != nil {
		return nil, fmt.Errorf("jobguard: %w: cron %q: %v", sqllock.ErrInvalidOption, expr, err)
	}
	spec2, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("jobguard: %w: cron %q: not a calendar schedule", sqllock.ErrInvalidOption, expr)
	}
	return cronSchedule{spec: spec2, loc: loc, fixed: fixedTime(spec), expr: expr}, nil
}

// fixedTime reports whether spec names its minutes and its hours, Vixie
// cron's test for a job that runs once per wall time. Of the descriptors
// only @hourly has a wildcard.
func fixedTime(spec string) bool {
	if strings.HasPrefix(spec, "@") {
		return spec != "@hourly"
	}
	f := strings.Fields(spec)
	return len(f) >= 2 && !strings.ContainsAny(f[0], "*?") && !strings.ContainsAny(f[1], "*?")
}

// parseCron is the parser, with its panics on malformed input turned into
// errors.
func parseCron(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed: %v", r)
		}
	}()
	return cronParser.Parse(spec)
}

// cronSchedule takes its fields from robfig/cron's parser but finds the
// firings itself: robfig/cron's Next fires at each occurrence of a wall
// time, twice for a fixed time the autumn change repeats.
type cronSchedule struct {
	spec  *cron.SpecSchedule
	loc   *time.Location
	fixed bool // the DST rules of a fixed-time job; see Cron
	expr  string
}

func (c cronSchedule) String() string { return "cron " + c.expr + " (" + c.loc.String() + ")" }

// Next looks day by day, from the day before t's (a firing of that day may
// come after t: its time repeated, or skipped to the change), for the
// first firing after t. Once one is found the next day is looked at too,
// as a time repeated late at night can come after the next day's first.
// Like robfig/cron's, it gives up after five years. The parser reads no
// seconds field: every firing is on a minute.
func (c cronSchedule) Next(t time.Time) time.Time {
	y, m, d := t.In(c.loc).Date()
	first := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1)
	var best time.Time
	found := -1
	for i := 0; found < 0 || i <= found+1; i++ {
		day := first.AddDate(0, 0, i)
		if day.Year() > y+5 {
			break
		}
		if !c.dayMatches(day) {
			continue
		}
		zones := zonesAround(day, c.loc)
		for h := range 24 {
			if c.spec.Hour&(1<<h) == 0 {
				continue
			}
			for mi := range 60 {
				if c.spec.Minute&(1<<mi) == 0 {
					continue
				}
				at, n := zones.instants(day.Add(time.Duration(h)*time.Hour+time.Duration(mi)*time.Minute), c.fixed)
				for _, x := range at[:n] {
					if x.After(t) && (best.IsZero() || x.Before(best)) {
						best = x
						if found < 0 {
							found = i
						}
					}
				}
			}
		}
	}
	if best.IsZero() {
		return best
	}
	return best.In(t.Location())
}

// dayMatches is robfig/cron's rule for a calendar day (given in UTC): the
// month, and the day of the month and of the week, both when either is *,
// else either one.
func (c cronSchedule) dayMatches(day time.Time) bool {
	const star = 1 << 63 // robfig/cron's mark of a field given as *
	s := c.spec
	if s.Month&(1<<uint(day.Month())) == 0 {
		return false
	}
	dom := s.Dom&(1<<uint(day.Day())) != 0
	dow := s.Dow&(1<<uint(day.Weekday())) != 0
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

// zone is a stretch of time with one UTC offset; a zero start or end is
// unbounded.
type zone struct {
	start, end time.Time
	offset     time.Duration
}

type zones []zone

// zonesAround lists, in order, loc's zones over every instant that can
// read a wall time of day: offsets are within a day of UTC.
func zonesAround(day time.Time, loc *time.Location) zones {
	to := day.Add(50 * time.Hour)
	var zs zones
	for at := day.Add(-26 * time.Hour); ; {
		l := at.In(loc)
		_, off := l.Zone()
		start, end := l.ZoneBounds()
		zs = append(zs, zone{start, end, time.Duration(off) * time.Second})
		if end.IsZero() || !end.Before(to) || !end.After(at) {
			return zs
		}
		at = end
	}
}

// instants returns the instants that read the wall time (given in UTC),
// earliest first: both of a time the clock repeats. For a fixed-time job
// only the first, and for a time the clock skips the change itself.
func (zs zones) instants(wall time.Time, fixed bool) (at [2]time.Time, n int) {
	for i, z := range zs {
		x := wall.Add(-z.offset)
		if (z.start.IsZero() || !x.Before(z.start)) && (z.end.IsZero() || x.Before(z.end)) {
			at[n] = x
			n++
			if fixed || n == len(at) {
				return at, n
			}
			continue
		}
		if fixed && n == 0 && i+1 < len(zs) {
			// The clock jumps from end+offset to end+next.offset.
			next := zs[i+1]
			if next.offset > z.offset && !wall.Before(z.end.Add(z.offset)) && wall.Before(z.end.Add(next.offset)) {
				at[0] = z.end
				return at, 1
			}
		}
	}
	return at, n
}

// Firing is one firing of a Loop, as its report sees it.
type Firing struct {
	At  time.Time // when the schedule fired
	Ran bool      // this replica ran the job; false: another one had it
	Err error     // the run's error (fn's, joined with the release's)
}

// LoopOption configures Loop.
type LoopOption func(*loopConfig) error

type loopConfig struct {
	report func(Firing)
}

// WithReport calls f after every firing of Loop, run or skipped: to log
// runs and their errors. f runs on Loop's goroutine.
func WithReport(f func(Firing)) LoopOption {
	return func(c *loopConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil report function", sqllock.ErrInvalidOption)
		}
		c.report = f
		return nil
	}
}

// Loop is the scheduler loop every replica would otherwise write: it waits
// for each firing of s and calls Run, until ctx ends. Start it in every
// replica with the same job and schedule; at each firing one replica runs
// fn and the others skip. A run that fails does not stop the loop (see
// WithReport); a run still going at the next firing makes this replica
// miss that firing, as cron does, and AtMost bounds it in any case.
//
// The replicas' clocks only decide when they try, never who runs: the job
// row and its times live on the database clock. Firings of replicas whose
// clocks differ by less than AtLeast fall on one run; keep AtLeast below
// the shortest gap between two firings, or the next one is skipped too.
//
// A firing whose try the end of ctx cut off is not reported; a run it cut
// short is, with its error. Loop returns when ctx ends (an error matching
// ctx.Err()), when the
// Guard is closed (sqllock.ErrClosed), or at once for an invalid job,
// schedule or option, and when the schedule never fires again.
func (g *Guard) Loop(ctx context.Context, job Job, s Schedule, fn func(ctx context.Context) error, opts ...LoopOption) error {
	cfg := loopConfig{report: func(Firing) {}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return fmt.Errorf("jobguard: loop %q: %w", job.Name, err)
		}
	}
	if err := job.validate(); err != nil {
		return fmt.Errorf("jobguard: loop %q: %w", job.Name, err)
	}
	if s == nil || fn == nil {
		return fmt.Errorf("jobguard: loop %q: %w: nil schedule or function", job.Name, sqllock.ErrInvalidOption)
	}
	if e, ok := s.(every); ok && job.AtLeast >= time.Duration(e) {
		return fmt.Errorf("jobguard: loop %q: %w: AtLeast %v is not below the period %v: every other firing would be skipped", job.Name, sqllock.ErrInvalidOption, job.AtLeast, time.Duration(e))
	}
	for {
		at := s.Next(time.Now())
		if at.IsZero() {
			return fmt.Errorf("jobguard: loop %q: %w: the schedule %v never fires again", job.Name, sqllock.ErrInvalidOption, s)
		}
		t := time.NewTimer(time.Until(at))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("jobguard: loop %q: %w", job.Name, ctx.Err())
		case <-t.C:
		}
		ran, err := g.Run(ctx, job, func(ctx context.Context) error {
			// The runner says when the job fires next, for operators.
			g.recordDue(ctx, job.Name, s.Next(at))
			return fn(ctx)
		})
		if !ran && ctx.Err() != nil {
			// Shut down before the try: not a firing to report.
			return fmt.Errorf("jobguard: loop %q: %w", job.Name, ctx.Err())
		}
		cfg.report(Firing{At: at, Ran: ran, Err: err})
		if errors.Is(err, sqllock.ErrClosed) {
			return err
		}
	}
}
