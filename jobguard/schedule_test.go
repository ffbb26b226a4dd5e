package jobguard_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
)

// Three replicas loop on one schedule: each period one of them runs the
// job, the others skip, and no period runs twice. AtLeast absorbs how far
// apart the replicas try for one firing (their timers, a loaded machine):
// the contract holds while that spread stays below it, so it is most of
// the period here.
func TestLoopOneRunPerPeriod(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		t.Parallel()
		table := jobTable(t, db)
		const period = time.Second
		job := jobguard.Job{Name: locktest.Key(t), AtMost: period, AtLeast: 7 * period / 10}
		every, err := jobguard.Every(period)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now().Add(4*period + period/2)
		ctx, cancel := context.WithDeadline(ctxT(t), end)
		defer cancel()
		var mu sync.Mutex
		runs := map[time.Time]int{}    // by firing
		firings := map[time.Time]int{} // reports, run or skipped
		var wg sync.WaitGroup
		for range 3 {
			g := newGuard(t, db, table)
			wg.Go(func() {
				err := g.Loop(ctx, job, every, func(ctx context.Context) error { return nil },
					jobguard.WithReport(func(f jobguard.Firing) {
						mu.Lock()
						defer mu.Unlock()
						if errors.Is(f.Err, context.DeadlineExceeded) {
							return // the test's end cut this firing short
						}
						firings[f.At]++
						if f.Ran {
							runs[f.At]++
						}
						if f.Err != nil {
							t.Errorf("run at %v: %v", f.At, f.Err)
						}
					}))
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Loop: %v, want the context's end", err)
				}
			})
		}
		wg.Wait()
		t.Logf("runs by firing %v; replicas that tried each %v", runs, firings)
		if len(firings) < 3 {
			t.Errorf("%d firings in 4.5 periods", len(firings))
		}
		for at := range firings {
			if at.After(end.Add(-period / 2)) {
				continue // the test's end may cut it short
			}
			if runs[at] != 1 {
				t.Errorf("firing %v ran %d times, want once", at, runs[at])
			}
			if !at.Equal(at.Truncate(period)) {
				t.Errorf("firing %v is not on a period boundary", at)
			}
		}
	})
}

// Cron reads its fields in the zone it is given, across DST changes.
func TestCron(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s, err := jobguard.Cron("30 2 * * *", berlin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ after, want string }{
		{"2026-01-10T12:00:00Z", "2026-01-11T01:30:00Z"}, // CET, UTC+1
		{"2026-07-10T12:00:00Z", "2026-07-11T00:30:00Z"}, // CEST, UTC+2
		// 29 March 2026: clocks jump from 02:00 to 03:00; 02:30 does not
		// exist, and the day's firing is at the change (03:00 CEST).
		{"2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z"},
	} {
		after, _ := time.Parse(time.RFC3339, c.after)
		want, _ := time.Parse(time.RFC3339, c.want)
		if got := s.Next(after); !got.Equal(want) {
			t.Errorf("Next(%s) = %v, want %v", c.after, got.UTC(), want)
		}
	}
	// The prefix overrides the zone given; nil means UTC.
	for _, c := range []struct {
		expr string
		loc  *time.Location
		want string
	}{
		{"CRON_TZ=America/New_York 0 9 * * 1-5", berlin, "2026-01-12T14:00:00Z"},
		{"@daily", nil, "2026-01-11T00:00:00Z"},
		{"0 */6 * * *", nil, "2026-01-10T18:00:00Z"},
	} {
		s, err := jobguard.Cron(c.expr, c.loc)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		after, _ := time.Parse(time.RFC3339, "2026-01-10T12:00:00Z")
		want, _ := time.Parse(time.RFC3339, c.want)
		if got := s.Next(after); !got.Equal(want) {
			t.Errorf("%q: Next = %v, want %v", c.expr, got.UTC(), want)
		}
	}
	for _, bad := range []string{"", "* * *", "61 * * * *", "@every 5m", "CRON_TZ=Mars/Olympus 0 1 * * *", "CRON_TZ=UTC", "TZ=", "0 0 30 2 *x"} {
		if _, err := jobguard.Cron(bad, nil); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("Cron(%q): %v, want ErrInvalidOption", bad, err)
		}
	}
	if _, err := jobguard.Every(time.Millisecond); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("Every(1ms): %v, want ErrInvalidOption", err)
	}
}

// Loop refuses what would never work, before it waits for anything.
func TestLoopBadInput(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	g := newGuard(t, db, jobTable(t, db))
	every, _ := jobguard.Every(time.Second)
	ok := jobguard.Job{Name: "j", AtMost: time.Second, AtLeast: 100 * time.Millisecond}
	fn := func(context.Context) error { return nil }
	never := scheduleFunc(func(time.Time) time.Time { return time.Time{} })
	for name, c := range map[string]struct {
		job  jobguard.Job
		s    jobguard.Schedule
		fn   func(context.Context) error
		opts []jobguard.LoopOption
	}{
		"bad job":           {jobguard.Job{Name: "", AtMost: time.Second}, every, fn, nil},
		"nil schedule":      {ok, nil, fn, nil},
		"nil fn":            {ok, every, nil, nil},
		"AtLeast >= period": {jobguard.Job{Name: "j", AtMost: 2 * time.Second, AtLeast: time.Second}, every, fn, nil},
		"nil report":        {ok, every, fn, []jobguard.LoopOption{jobguard.WithReport(nil)}},
		"never fires":       {ok, never, fn, nil},
	} {
		if err := g.Loop(ctxT(t), c.job, c.s, c.fn, c.opts...); !errors.Is(err, sqllock.ErrInvalidOption) && !errors.Is(err, sqllock.ErrInvalidKey) {
			t.Errorf("%s: %v, want an invalid option or key", name, err)
		}
	}
	g.Close()
	soon := scheduleFunc(func(t time.Time) time.Time { return t.Add(time.Millisecond) })
	if err := g.Loop(ctxT(t), ok, soon, fn); !errors.Is(err, sqllock.ErrClosed) {
		t.Errorf("Loop on a closed Guard: %v, want ErrClosed", err)
	}
}

type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }

// KeepAlive: a run three times longer than AtMost keeps its job all along,
// and is not cancelled; without it the run is cut at AtMost's margin.
func TestKeepAlive(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		t.Parallel()
		ctx, table := ctxT(t), jobTable(t, db)
		g, other := newGuard(t, db, table), newGuard(t, db, table)
		// AtMost leaves room for a statement slowed by a loaded machine;
		// keep-alive extends every AtMost/3.
		const atMost = 1500 * time.Millisecond
		for _, keep := range []bool{true, false} {
			job := jobguard.Job{Name: locktest.Key(t), AtMost: atMost, KeepAlive: keep}
			var refused int
			ran, err := g.Run(ctx, job, func(ctx context.Context) error {
				for range 9 { // 3 x AtMost
					select {
					case <-ctx.Done():
						return context.Cause(ctx)
					case <-time.After(atMost / 3):
					}
					if _, err := other.TryAcquire(ctx, job); errors.Is(err, sqllock.ErrNotAcquired) {
						refused++
					}
				}
				return nil
			})
			t.Logf("keep-alive %v: ran %v, %v; another replica refused %d times", keep, ran, err, refused)
			if keep && (err != nil || refused != 9) {
				t.Errorf("with keep-alive: %v, refused %d of 9; want the run to hold the job throughout", err, refused)
			}
			if !keep && !errors.Is(err, sqllock.ErrLockLost) {
				t.Errorf("without keep-alive: %v, want ErrLockLost at AtMost", err)
			}
		}
	})
}

// A force-released run with keep-alive learns of it at its next extension.
func TestKeepAliveNoticesForceRelease(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		t.Parallel()
		ctx, table := ctxT(t), jobTable(t, db)
		g := newGuard(t, db, table)
		job := jobguard.Job{Name: locktest.Key(t), AtMost: 6 * time.Second, KeepAlive: true}
		start := time.Now()
		_, err := g.Run(ctx, job, func(ctx context.Context) error {
			token, _ := sqllock.TokenFrom(ctx)
			if _, err := g.ForceRelease(ctx, job.Name, token); err != nil {
				return err
			}
			<-ctx.Done()
			return context.Cause(ctx)
		})
		if !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Run: %v, want ErrLockLost", err)
		}
		// The extension at AtMost/3 (2s) notices; the expiry would only at
		// 5.4s.
		if took := time.Since(start); took > 4500*time.Millisecond {
			t.Errorf("the loss took %v, want about AtMost/3 (2s): the keep-alive did not notice", took)
		}
	})
}
