package advisory_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// cancelSlack is how long after its cancel a cancelled Acquire may take to
// return: a wait that missed every interrupt ends at its own bound (1s).
const cancelSlack = 1500 * time.Millisecond

// cancelled starts an Acquire of key on l, cancels it when cancelAt
// returns, and reports how long after the cancel the Acquire returned.
func cancelled(t *testing.T, ctx context.Context, l *advisory.Locker, key string, cancelAt func(cancel func())) time.Duration {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(wctx, key)
		if err == nil {
			err = errors.Join(errors.New("Acquire won a held key"), lease.Release(ctx))
		}
		got <- err
	}()
	var at time.Time
	cancelAt(func() { at = time.Now(); cancel() })
	select {
	case err := <-got:
		took := time.Since(at)
		if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want ErrNotAcquired and context.Canceled", err)
		}
		return took
	case <-time.After(30 * time.Second):
		t.Fatalf("Acquire still waiting 30s after its cancel")
		return 0
	}
}

// afterWaits checks that the cancelled waits left nothing behind: the key
// is still the holder's, free once it is released, and a third Locker
// takes it.
func afterWaits(t *testing.T, ctx context.Context, db *testdb.DB, held sqllock.Lease, before []int64) {
	t.Helper()
	if now := holders(t, db, held.Key()); !slices.Equal(now, before) {
		t.Errorf("holders %v after the cancelled waits, want the holder's %v", now, before)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := holders(t, db, held.Key()); len(h) != 0 {
		t.Errorf("key held by %v after the holder's release", h)
	}
	third := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
	lease, err := third.TryAcquire(ctx, held.Key())
	if err != nil {
		t.Fatalf("the key is not free after the holder's release: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCancelHeldBack: a wait cancelled while its statement is held back
// in the client for 300ms (the cancel reaches an idle session, which the
// server ignores) returns within cancelSlack of the cancel, and leaves
// the key to its holder.
func TestCancelHeldBack(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		holder := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
		waiter := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		before := holders(t, db, key)
		armed := make(chan struct{}, 1)
		advisory.SetBeforeWait(t, func() {
			armed <- struct{}{}
			time.Sleep(300 * time.Millisecond)
		})
		took := cancelled(t, ctx, waiter, key, func(cancel func()) {
			<-armed
			cancel()
		})
		if took > cancelSlack {
			t.Errorf("cancelled Acquire returned %v after its cancel, want within %v", took, cancelSlack)
		}
		afterWaits(t, ctx, db, held, before)
	})
}

// TestCancelSweep: cancels swept over 0-5ms after a blocked Acquire
// starts, against a key held by another session, each return within
// cancelSlack; afterwards the key is the holder's alone, and free at its
// release.
func TestCancelSweep(t *testing.T) {
	const rounds = 300
	forEach(t, func(t *testing.T, db *testdb.DB) {
		key := locktest.Key(t)
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
		defer stop()
		holder := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
		waiter := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		before := holders(t, db, key)
		var worst time.Duration
		late := 0
		for i := range rounds {
			offset := time.Duration(i%51) * 100 * time.Microsecond
			took := cancelled(t, ctx, waiter, key, func(cancel func()) {
				time.Sleep(offset)
				cancel()
			})
			worst = max(worst, took)
			if took > cancelSlack {
				late++
				t.Errorf("round %d (cancel at %v): returned %v after its cancel", i, offset, took)
			}
		}
		t.Logf("%d cancels, %d late, slowest return %v after its cancel", rounds, late, worst)
		afterWaits(t, ctx, db, held, before)
	})
}

// TestCancelMissedInterrupt: a wait whose interrupts all miss (none is
// sent, as when no connection is free to send one from) still ends
// within cancelSlack of its cancel on MySQL and MariaDB, at the bound of
// its GET_LOCK, and leaves the key to its holder. PostgreSQL's wait has
// no bound (see the package doc): a missed interrupt there waits for the
// holder's release.
func TestCancelMissedInterrupt(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	ctx, key := ctxT(t), locktest.Key(t)
	holder := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
	waiter := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	before := holders(t, db, key)
	advisory.SetInterruptLost(t)
	for i := range 3 {
		took := cancelled(t, ctx, waiter, key, func(cancel func()) {
			waitQueued(t, db, waiter, key, 1)
			cancel()
		})
		if took > cancelSlack {
			t.Errorf("wait %d: cancelled Acquire returned %v after its cancel, want within %v", i, took, cancelSlack)
		}
	}
	afterWaits(t, ctx, db, held, before)
}

// TestWaitCancelKeepsOtherLease: a Locker holds a key it won through a
// wait in the server, on its one wait session; its wait for another key,
// cancelled, ends that wait alone: the first lease and its server lock
// stay.
func TestWaitCancelKeepsOtherLease(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		first, second := locktest.Key(t)+"/1", locktest.Key(t)+"/2"
		other := newLocker(t, testdb.Fresh(t, db.Dialect, 0))
		waiter := newLocker(t, testdb.Fresh(t, db.Dialect, 0), advisory.WithWaitSessions(1))
		a, err := other.Acquire(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan sqllock.Lease, 1)
		go func() {
			lease, err := waiter.Acquire(ctx, first)
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		waitQueued(t, db, waiter, first, 1)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		won := <-got
		if won == nil {
			return
		}
		onWait := holders(t, db, first)
		if len(onWait) != 1 || !slices.Contains(advisory.WaitBackends(waiter), onWait[0]) {
			t.Fatalf("%q held by %v, want the wait session of %v", first, onWait, advisory.WaitBackends(waiter))
		}
		b, err := other.Acquire(ctx, second)
		if err != nil {
			t.Fatal(err)
		}
		// Warm: a session of the pool at hand, so the waits below get past
		// connecting before their cancels.
		if _, err := waiter.TryAcquire(ctx, second); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held key = %v, want ErrNotAcquired", err)
		}
		for i := range 50 {
			offset := time.Duration(i%11) * 500 * time.Microsecond
			cancelled(t, ctx, waiter, second, func(cancel func()) {
				if i%10 == 9 {
					offset = 200 * time.Millisecond // well into the wait
				}
				time.Sleep(offset)
				cancel()
			})
		}
		if err := won.Err(); err != nil {
			t.Fatalf("the first lease ended: %v", err)
		}
		if now := holders(t, db, first); !slices.Equal(now, onWait) {
			t.Fatalf("%q held by %v after the cancelled waits, want %v", first, now, onWait)
		}
		if err := won.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
