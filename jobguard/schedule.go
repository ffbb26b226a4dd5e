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
// replica started, so replicas would not agree; use Every. A day that
// skips a time (the spring DST change) skips its firing, as cron does.
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
	spec2.Location = loc
	return cronSchedule{spec2, expr}, nil
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

type cronSchedule struct {
	*cron.SpecSchedule
	expr string
}

func (c cronSchedule) String() string { return "cron " + c.expr + " (" + c.Location.String() + ")" }

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
		ran, err := g.Run(ctx, job, fn)
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
