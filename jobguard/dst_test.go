package jobguard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
)

// firings lists every firing of s after from, up to and including to.
func firings(t *testing.T, s jobguard.Schedule, from, to time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for at := from; ; {
		next := s.Next(at)
		if next.IsZero() || next.After(to) {
			return out
		}
		if !next.After(at) {
			t.Fatalf("Next(%v) = %v: not after it", at, next)
		}
		out = append(out, next)
		at = next
	}
}

// Cron's two DST rules, on the days the clocks change, in zones north and
// south of the equator, one whose clocks move by 30 minutes, and one
// without DST as the control. An expression that names its minutes and
// hours fires once per local wall time: on the first of a time the
// autumn change repeats, and at the change itself for a time the spring
// change skips. An expression with a wildcard minute or hour fires at
// every instant whose wall time it matches: both of a repeated time (they
// are apart in real time), none of a skipped one.
func TestCronDST(t *testing.T) {
	for _, c := range []struct {
		zone, expr string
		from, to   string   // the window, as wall times with their offsets
		want       []string // every firing in it
	}{
		// Europe/Berlin: 25 Oct 2026 03:00 CEST -> 02:00 CET; 29 Mar 2026
		// 02:00 CET -> 03:00 CEST.
		{"Europe/Berlin", "30 2 * * *", "2026-10-24T22:00:00+02:00", "2026-10-25T06:00:00+01:00", []string{"2026-10-25T02:30:00+02:00"}},
		{"Europe/Berlin", "30 2 * * 0", "2026-10-24T22:00:00+02:00", "2026-10-25T06:00:00+01:00", []string{"2026-10-25T02:30:00+02:00"}},
		{"Europe/Berlin", "30 2 25 10 *", "2026-10-24T22:00:00+02:00", "2026-10-25T06:00:00+01:00", []string{"2026-10-25T02:30:00+02:00"}},
		{"Europe/Berlin", "30 1,2 * * *", "2026-10-24T22:00:00+02:00", "2026-10-25T06:00:00+01:00", []string{"2026-10-25T01:30:00+02:00", "2026-10-25T02:30:00+02:00"}},
		{"Europe/Berlin", "0 2-3 * * *", "2026-10-24T22:00:00+02:00", "2026-10-25T06:00:00+01:00", []string{"2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00"}},
		{"Europe/Berlin", "30 * * * *", "2026-10-25T00:00:00+02:00", "2026-10-25T04:00:00+01:00", []string{"2026-10-25T00:30:00+02:00", "2026-10-25T01:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:30:00+01:00"}},
		{"Europe/Berlin", "*/20 2 * * *", "2026-10-24T22:00:00+02:00", "2026-10-25T06:00:00+01:00", []string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:20:00+02:00", "2026-10-25T02:40:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:20:00+01:00", "2026-10-25T02:40:00+01:00"}},
		{"Europe/Berlin", "30 2 * * *", "2026-03-28T22:00:00+01:00", "2026-03-29T06:00:00+02:00", []string{"2026-03-29T03:00:00+02:00"}},
		{"Europe/Berlin", "30 2 * * 0", "2026-03-28T22:00:00+01:00", "2026-03-29T06:00:00+02:00", []string{"2026-03-29T03:00:00+02:00"}},
		{"Europe/Berlin", "30 2 29 3 *", "2026-03-28T22:00:00+01:00", "2026-03-29T06:00:00+02:00", []string{"2026-03-29T03:00:00+02:00"}},
		// Two skipped times of one expression make one firing at the change.
		{"Europe/Berlin", "0,30 2 * * *", "2026-03-28T22:00:00+01:00", "2026-03-29T06:00:00+02:00", []string{"2026-03-29T03:00:00+02:00"}},
		{"Europe/Berlin", "30 * * * *", "2026-03-29T00:00:00+01:00", "2026-03-29T05:00:00+02:00", []string{"2026-03-29T00:30:00+01:00", "2026-03-29T01:30:00+01:00", "2026-03-29T03:30:00+02:00", "2026-03-29T04:30:00+02:00"}},
		{"Europe/Berlin", "*/20 2 * * *", "2026-03-28T22:00:00+01:00", "2026-03-29T06:00:00+02:00", nil},

		// America/New_York: 1 Nov 2026 02:00 EDT -> 01:00 EST; 8 Mar 2026
		// 02:00 EST -> 03:00 EDT.
		{"America/New_York", "30 1 * * *", "2026-10-31T22:00:00-04:00", "2026-11-01T06:00:00-05:00", []string{"2026-11-01T01:30:00-04:00"}},
		{"America/New_York", "30 1 * * 0", "2026-10-31T22:00:00-04:00", "2026-11-01T06:00:00-05:00", []string{"2026-11-01T01:30:00-04:00"}},
		{"America/New_York", "30 1 1 11 *", "2026-10-31T22:00:00-04:00", "2026-11-01T06:00:00-05:00", []string{"2026-11-01T01:30:00-04:00"}},
		{"America/New_York", "30 * * * *", "2026-11-01T00:00:00-04:00", "2026-11-01T03:00:00-05:00", []string{"2026-11-01T00:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:30:00-05:00"}},
		{"America/New_York", "30 2 * * *", "2026-03-07T22:00:00-05:00", "2026-03-08T06:00:00-04:00", []string{"2026-03-08T03:00:00-04:00"}},
		{"America/New_York", "30 2 * * 0", "2026-03-07T22:00:00-05:00", "2026-03-08T06:00:00-04:00", []string{"2026-03-08T03:00:00-04:00"}},
		{"America/New_York", "30 2 8 3 *", "2026-03-07T22:00:00-05:00", "2026-03-08T06:00:00-04:00", []string{"2026-03-08T03:00:00-04:00"}},
		{"America/New_York", "30 * * * *", "2026-03-08T00:00:00-05:00", "2026-03-08T05:00:00-04:00", []string{"2026-03-08T00:30:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00", "2026-03-08T04:30:00-04:00"}},

		// Australia/Sydney, the opposite season: 5 Apr 2026 03:00 AEDT ->
		// 02:00 AEST; 4 Oct 2026 02:00 AEST -> 03:00 AEDT.
		{"Australia/Sydney", "30 2 * * *", "2026-04-04T22:00:00+11:00", "2026-04-05T06:00:00+10:00", []string{"2026-04-05T02:30:00+11:00"}},
		{"Australia/Sydney", "30 2 * * 0", "2026-04-04T22:00:00+11:00", "2026-04-05T06:00:00+10:00", []string{"2026-04-05T02:30:00+11:00"}},
		{"Australia/Sydney", "30 2 5 4 *", "2026-04-04T22:00:00+11:00", "2026-04-05T06:00:00+10:00", []string{"2026-04-05T02:30:00+11:00"}},
		{"Australia/Sydney", "30 * * * *", "2026-04-05T00:00:00+11:00", "2026-04-05T04:00:00+10:00", []string{"2026-04-05T00:30:00+11:00", "2026-04-05T01:30:00+11:00", "2026-04-05T02:30:00+11:00", "2026-04-05T02:30:00+10:00", "2026-04-05T03:30:00+10:00"}},
		{"Australia/Sydney", "30 2 * * *", "2026-10-03T22:00:00+10:00", "2026-10-04T06:00:00+11:00", []string{"2026-10-04T03:00:00+11:00"}},
		{"Australia/Sydney", "30 2 * * 0", "2026-10-03T22:00:00+10:00", "2026-10-04T06:00:00+11:00", []string{"2026-10-04T03:00:00+11:00"}},
		{"Australia/Sydney", "30 2 4 10 *", "2026-10-03T22:00:00+10:00", "2026-10-04T06:00:00+11:00", []string{"2026-10-04T03:00:00+11:00"}},
		{"Australia/Sydney", "30 * * * *", "2026-10-04T00:00:00+10:00", "2026-10-04T05:00:00+11:00", []string{"2026-10-04T00:30:00+10:00", "2026-10-04T01:30:00+10:00", "2026-10-04T03:30:00+11:00", "2026-10-04T04:30:00+11:00"}},

		// Australia/Lord_Howe moves by 30 minutes: 5 Apr 2026 02:00 +11 ->
		// 01:30 +10:30; 4 Oct 2026 02:00 +10:30 -> 02:30 +11.
		{"Australia/Lord_Howe", "45 1 * * *", "2026-04-04T22:00:00+11:00", "2026-04-05T06:00:00+10:30", []string{"2026-04-05T01:45:00+11:00"}},
		{"Australia/Lord_Howe", "45 1 * * 0", "2026-04-04T22:00:00+11:00", "2026-04-05T06:00:00+10:30", []string{"2026-04-05T01:45:00+11:00"}},
		{"Australia/Lord_Howe", "45 1 5 4 *", "2026-04-04T22:00:00+11:00", "2026-04-05T06:00:00+10:30", []string{"2026-04-05T01:45:00+11:00"}},
		{"Australia/Lord_Howe", "45 * * * *", "2026-04-05T00:00:00+11:00", "2026-04-05T03:00:00+10:30", []string{"2026-04-05T00:45:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-05T02:45:00+10:30"}},
		{"Australia/Lord_Howe", "15 2 * * *", "2026-10-03T22:00:00+10:30", "2026-10-04T06:00:00+11:00", []string{"2026-10-04T02:30:00+11:00"}},
		{"Australia/Lord_Howe", "15 2 * * 0", "2026-10-03T22:00:00+10:30", "2026-10-04T06:00:00+11:00", []string{"2026-10-04T02:30:00+11:00"}},
		{"Australia/Lord_Howe", "15 2 4 10 *", "2026-10-03T22:00:00+10:30", "2026-10-04T06:00:00+11:00", []string{"2026-10-04T02:30:00+11:00"}},
		{"Australia/Lord_Howe", "15 * * * *", "2026-10-04T00:00:00+10:30", "2026-10-04T04:00:00+11:00", []string{"2026-10-04T00:15:00+10:30", "2026-10-04T01:15:00+10:30", "2026-10-04T03:15:00+11:00"}},
		{"Australia/Lord_Howe", "45 * * * *", "2026-10-04T00:00:00+10:30", "2026-10-04T04:00:00+11:00", []string{"2026-10-04T00:45:00+10:30", "2026-10-04T01:45:00+10:30", "2026-10-04T02:45:00+11:00", "2026-10-04T03:45:00+11:00"}},

		// America/Santiago changes at midnight: 5 Apr 2026 00:00 -03 ->
		// 4 Apr 23:00 -04; 6 Sep 2026 00:00 -04 -> 01:00 -03.
		{"America/Santiago", "30 23 * * *", "2026-04-04T20:00:00-03:00", "2026-04-05T06:00:00-04:00", []string{"2026-04-04T23:30:00-03:00"}},
		{"America/Santiago", "@daily", "2026-04-04T20:00:00-03:00", "2026-04-05T06:00:00-04:00", []string{"2026-04-05T00:00:00-04:00"}},
		{"America/Santiago", "@daily", "2026-09-05T20:00:00-04:00", "2026-09-06T06:00:00-03:00", []string{"2026-09-06T01:00:00-03:00"}},

		// Asia/Kolkata has no DST: the same days are ordinary ones.
		{"Asia/Kolkata", "30 2 * * *", "2026-10-24T22:00:00+05:30", "2026-10-25T06:00:00+05:30", []string{"2026-10-25T02:30:00+05:30"}},
		{"Asia/Kolkata", "30 2 * * 0", "2026-10-24T22:00:00+05:30", "2026-10-25T06:00:00+05:30", []string{"2026-10-25T02:30:00+05:30"}},
		{"Asia/Kolkata", "30 2 29 3 *", "2026-03-28T22:00:00+05:30", "2026-03-29T06:00:00+05:30", []string{"2026-03-29T02:30:00+05:30"}},
		{"Asia/Kolkata", "30 * * * *", "2026-10-25T00:00:00+05:30", "2026-10-25T04:00:00+05:30", []string{"2026-10-25T00:30:00+05:30", "2026-10-25T01:30:00+05:30", "2026-10-25T02:30:00+05:30", "2026-10-25T03:30:00+05:30"}},
	} {
		t.Run(c.zone+" "+c.expr+" "+c.from[:10], func(t *testing.T) {
			loc, err := time.LoadLocation(c.zone)
			if err != nil {
				t.Fatal(err)
			}
			s, err := jobguard.Cron(c.expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			from, err := time.Parse(time.RFC3339, c.from)
			if err != nil {
				t.Fatal(err)
			}
			to, err := time.Parse(time.RFC3339, c.to)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, at := range firings(t, s, from, to) {
				got = append(got, at.In(loc).Format(time.RFC3339))
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("firings from %s to %s:\n got  %v\n want %v", c.from, c.to, got, c.want)
			}
		})
	}
}

// Cron's firings stay in step with robfig/cron's on ordinary days, for a
// spread of expressions over a year in several zones: the DST rules are
// all it changes.
func TestCronOrdinaryDays(t *testing.T) {
	for _, zone := range []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, expr := range []string{"0 9 * * 1-5", "*/15 * * * *", "5 4 1 * *", "0 0 29 2 *", "0 12 13 * 5", "17 */5 * * *", "@weekly", "@hourly", "0 0 30 2 *"} {
			s, err := jobguard.Cron(expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			// A day before each change and a day after, and ordinary days.
			for _, from := range []string{"2026-01-10T12:00:00Z", "2026-03-27T12:00:00Z", "2026-03-30T12:00:00Z", "2026-07-01T00:00:00Z", "2026-10-23T12:00:00Z", "2026-10-26T12:00:00Z", "2026-12-31T23:59:30Z"} {
				at, _ := time.Parse(time.RFC3339, from)
				got := s.Next(at)
				want := referenceNext(expr, loc, at)
				if !got.Equal(want) {
					t.Errorf("%s %q: Next(%s) = %v, robfig/cron says %v", zone, expr, from, got, want)
				}
			}
		}
	}
}

// referenceNext is robfig/cron's own Next for expr in loc.
func referenceNext(expr string, loc *time.Location, at time.Time) time.Time {
	p := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	s, err := p.Parse(expr)
	if err != nil {
		panic(err)
	}
	spec := s.(*cron.SpecSchedule)
	spec.Location = loc
	return spec.Next(at)
}

// Loop runs a nightly job once on the night the clocks go back, with the
// README's recipe (02:00, AtLeast far below a day). Time runs 3600 times
// faster in the schedule the loop sees, so the night's hours pass in
// seconds: Europe/Berlin from 00:30 CEST to 04:00 CET on 25 Oct 2026.
func TestLoopOnceAcrossAutumnChange(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	nightly, err := jobguard.Cron("0 2 * * *", berlin)
	if err != nil {
		t.Fatal(err)
	}
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		t.Parallel()
		table := jobTable(t, db)
		g := newGuard(t, db, table)
		fakeStart, _ := time.Parse(time.RFC3339, "2026-10-25T00:30:00+02:00")
		fakeEnd, _ := time.Parse(time.RFC3339, "2026-10-25T04:00:00+01:00")
		fast := newFastSchedule(nightly, fakeStart, 3600)
		// The two 02:00s are an hour of schedule time apart: a second of
		// real time, so AtLeast must stay below it for a second run to
		// be possible at all.
		job := jobguard.Job{Name: locktest.Key(t), AtMost: 400 * time.Millisecond, AtLeast: 200 * time.Millisecond}
		ctx, cancel := context.WithDeadline(ctxT(t), fast.real(fakeEnd))
		defer cancel()
		var mu sync.Mutex
		var runs []string
		err := g.Loop(ctx, job, fast, func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			runs = append(runs, fast.fake(time.Now()).In(berlin).Format("15:04 MST"))
			return nil
		}, jobguard.WithReport(func(f jobguard.Firing) {
			if f.Err != nil && !errors.Is(f.Err, context.DeadlineExceeded) {
				t.Errorf("firing %v: %v", fast.fake(f.At), f.Err)
			}
		}))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Loop: %v, want the context's end", err)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("runs at (schedule time) %v", runs)
		if len(runs) != 1 {
			t.Errorf("the nightly job ran %d times on the night the clocks go back, want once: %v", len(runs), runs)
		}
	})
}

// fastSchedule shows a schedule to Loop with time running speed times
// faster, from fakeStart at the moment it was made.
type fastSchedule struct {
	s         jobguard.Schedule
	realStart time.Time
	fakeStart time.Time
	speed     time.Duration
}

func newFastSchedule(s jobguard.Schedule, fakeStart time.Time, speed time.Duration) *fastSchedule {
	return &fastSchedule{s: s, realStart: time.Now(), fakeStart: fakeStart, speed: speed}
}

func (f *fastSchedule) fake(real time.Time) time.Time {
	return f.fakeStart.Add(real.Sub(f.realStart) * f.speed)
}

func (f *fastSchedule) real(fake time.Time) time.Time {
	return f.realStart.Add(fake.Sub(f.fakeStart) / f.speed)
}

func (f *fastSchedule) Next(t time.Time) time.Time {
	next := f.s.Next(f.fake(t))
	if next.IsZero() {
		return next
	}
	return f.real(next)
}

func (f *fastSchedule) String() string { return fmt.Sprintf("%v, %dx", f.s, f.speed) }
