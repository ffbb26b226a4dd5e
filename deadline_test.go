package sqllock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// lateTimer is a context whose deadline has passed while its timer fires
// only after lag, as on a loaded machine: a dial or read given that
// deadline fails at once, before the context reports its end.
type lateTimer struct {
	context.Context
	deadline time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.deadline, true }

func newLateTimer(t testing.TB, lag time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), lag)
	t.Cleanup(cancel)
	return lateTimer{Context: ctx, deadline: time.Now().Add(-time.Millisecond)}
}

// TestDeadlinePassedBeforeItsTimer: an acquisition whose deadline has
// passed, on a pool that must dial, is told as the deadline's end (an
// error matching both ErrNotAcquired and context.DeadlineExceeded), never
// as the i/o timeout of the dial, and leaves the key free. On a loaded
// machine a dial's deadline fires before the context's own timer.
func TestDeadlinePassedBeforeItsTimer(t *testing.T) {
	targets := append(multiTargets[:len(multiTargets):len(multiTargets)], multiTarget{"optimistic", testdb.Dialects,
		func(t testing.TB, db *testdb.DB) sqllock.Locker {
			l, err := optimistic.New(db.DB, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			for _, d := range tg.dialects {
				t.Run(d.String(), func(t *testing.T) {
					t.Parallel()
					for _, try := range []bool{false, true} {
						db := testdb.Fresh(t, d, 4) // no idle connection: the first statement dials
						l := tg.new(t, db)
						key := locktest.Key(t)
						acquire := l.Acquire
						if try {
							acquire = l.TryAcquire
						}
						lease, err := acquire(newLateTimer(t, 20*time.Millisecond), key)
						if err == nil {
							_ = lease.Release(ctxFor(t))
							t.Fatalf("try=%v: acquired with a passed deadline", try)
						}
						if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
							t.Fatalf("try=%v: error %q does not match both ErrNotAcquired and DeadlineExceeded", try, err)
						}
						lease, err = l.TryAcquire(ctxFor(t), key)
						if err != nil {
							t.Fatalf("try=%v: key not free after the failed acquisition: %v", try, err)
						}
						if err := lease.Release(ctxFor(t)); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		})
	}
}
