package tablelock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// boundTTL is the lease of the tests of bounded waits: long enough that
// "waited a lease" and "waited at most the bound" (1 s) stand far apart.
const boundTTL = 8 * time.Second

// within is the slack of those tests: three times the bound.
const within = 3 * time.Second

// servedWithin fails t unless the background acquisition got succeeds
// within d of since; it returns how long it took.
func servedWithin(t *testing.T, got <-chan error, since time.Time, d time.Duration, what string) time.Duration {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(boundTTL + 10*time.Second):
		t.Fatalf("%s: not served within %v", what, boundTTL+10*time.Second)
	}
	took := time.Since(since)
	if took > d {
		t.Fatalf("%s: served %v after the key was freed; want within %v (the lease is %v)", what, took.Round(time.Millisecond), d, boundTTL)
	}
	t.Logf("%s: served %v after the key was freed", what, took.Round(time.Millisecond))
	return took
}

// waitLockWait waits until a statement of another session waits for a
// row lock.
func waitLockWait(t *testing.T, db *testdb.DB, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid' AND transactionid IN
			(SELECT transactionid FROM pg_locks WHERE pid = $1 AND locktype = 'transactionid' AND granted)`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no take came to wait for the row lock")
		}
	}
}

// TestFairQuitterMidTake (F1): a fair waiter that gives up while its take
// waits for the row lock leaves no entry behind once its take commits, and
// the live waiter queued after it gets the key at once when the holder
// releases, not a lease later. The test holds the row with SELECT ... FOR
// UPDATE while the waiter's context ends, then lets the take go on; the
// quitter's Locker is closed before the release, so nobody of it can give
// a grant back.
func TestFairQuitterMidTake(t *testing.T) {
	db, table, _ := fairTable(t)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL), tablelock.WithFairness(true)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	key := locktest.Key(t)
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var pid int
	if err := tx.QueryRow("SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1 FOR UPDATE", key); err != nil {
		t.Fatal(err)
	}
	quitter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	qctx, qcancel := context.WithCancel(ctx)
	quit := make(chan error, 1)
	go func() {
		_, err := quitter.Acquire(qctx, key)
		quit <- err
	}()
	waitLockWait(t, db, pid)
	qcancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Fatalf("the quitter's Acquire = %v, want it cancelled", err)
	}
	time.Sleep(200 * time.Millisecond) // its leaving, beside the take
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The take commits its refusal now; a leave that waited for it finds
	// the entry.
	time.Sleep(500 * time.Millisecond)
	var left []string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left, err = queuedIn(db, table, key); err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("entries of a waiter that gave up are still queued 3s after its take committed: %q", left)
	}
	quitter.Close()

	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	got := acquireAndRelease(ctx, waiter, key)
	waitQueued(t, db, table, key, len(left)+1)
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, got, released, within, "the live waiter behind a quitter")
}

// TestFairGrantToKilledLapses: a grant to a waiter whose process was
// killed while queued holds the key only for the claim window, and the
// live waiter queued after it gets the key within the window and the
// bound, not the dead one's lease.
func TestFairGrantToKilledLapses(t *testing.T) {
	db, table, _ := fairTable(t)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL), tablelock.WithFairness(true)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	key := locktest.Key(t)
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	child := testdb.Child(t, "TestFairWaiterChild", envFairChild+"="+table+"/"+key)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, db, table, key, 1)
	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	got := acquireAndRelease(ctx, waiter, key)
	waitQueued(t, db, table, key, 2)
	child.Process.Kill()
	child.Wait()
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, got, released, within, "the live waiter behind a killed one")
}

// TestGoneHeadOfQueue (F4): in the default order, Lockers gone with their
// ids at the head of the queue (closed while waiting, their ids put back
// as a crash leaves them) cost the live waiter queued fourth at most the
// bound: the release calls the first, and copies reach only the two after
// it.
func TestGoneHeadOfQueue(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	key := locktest.Key(t)
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const gone = 3
	quit := make(chan error, gone)
	var ls []*tablelock.Locker
	for i := range gone {
		l := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
		ls = append(ls, l)
		go func() {
			_, err := l.Acquire(ctx, key)
			quit <- err
		}()
		waitQueued(t, db, table, key, i+1)
	}
	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	got := acquireAndRelease(ctx, waiter, key)
	waitQueued(t, db, table, key, gone+1)
	q := queueOf(t, db, table, key)
	for _, l := range ls {
		l.Close()
		if err := <-quit; !errors.Is(err, sqllock.ErrClosed) {
			t.Fatalf("Acquire on a closed Locker: %v", err)
		}
	}
	restoreQueue(t, db, table, key, q, 1)
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, got, released, within, "the live waiter behind three gone Lockers")
}

// TestPoolOfOne (F5): a Locker over a pool of one connection takes a free
// key with a blocking Acquire, and a held one soon after its release in
// another process, within the caller's deadline: it has no room to
// listen, so its waiters poll.
func TestPoolOfOne(t *testing.T) {
	db := testdb.Fresh(t, sqllock.Postgres, 1)
	l := newLocker(t, db, tablelock.WithTTL(boundTTL))
	other := newLocker(t, testdb.Open(t, sqllock.Postgres), tablelock.WithTTL(boundTTL))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	key := locktest.Key(t)
	start := time.Now()
	a, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire of a free key on a pool of one, %v after it began: %v", time.Since(start).Round(time.Millisecond), err)
	}
	if took := time.Since(start); took > within {
		t.Fatalf("Acquire of a free key on a pool of one took %v", took)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := other.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAndRelease(ctx, l, key)
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, got, released, within, "a waiter on a pool of one")
	// Fair order needs a listening session besides the statements.
	if _, err := tablelock.New(db.DB, db.Dialect, tablelock.WithFairness(true)); err == nil {
		if _, err := newLocker(t, db, tablelock.WithFairness(true)).Acquire(ctx, locktest.Key(t)); err != nil {
			t.Fatalf("a fair Locker on a pool of one: %v", err)
		}
	} else if !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Fatalf("New with fairness on a pool of one = %v; want it to work or ErrInvalidOption saying why", err)
	}
}

// TestFairDeadlineStorm (F7): fair Lockers sending Acquires with short
// deadlines at a held key leave no entries behind once they have given
// up, and after the release the key serves the next Acquire at once, not
// a lease later. The test logs the most server sessions the Lockers held
// at once.
func TestFairDeadlineStorm(t *testing.T) {
	db, table, _ := fairTable(t)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL), tablelock.WithFairness(true)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	key := locktest.Key(t)
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const lockers, each = 8, 60
	app := fmt.Sprintf("storm_%x", rand.Uint64())
	var wg sync.WaitGroup
	var sessions atomic.Int64
	stop := make(chan struct{})
	for range lockers {
		pdb, err := sql.Open(db.Driver, db.DSN+"&application_name="+app)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pdb.Close() })
		l, err := tablelock.New(pdb, sqllock.Postgres, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		wg.Go(func() {
			for range each {
				c, cancel := context.WithTimeout(ctx, time.Duration(5+rand.IntN(30))*time.Millisecond)
				lease, err := l.Acquire(c, key)
				cancel()
				if err == nil {
					lease.Release(ctx)
				}
			}
		})
	}
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			var n int64
			if err := db.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
				continue
			}
			if n > sessions.Load() {
				sessions.Store(n)
			}
		}
	})
	wg.Wait()
	// Their leaving runs in the background: give it a moment.
	time.Sleep(time.Second)
	close(stop)
	sampler.Wait()
	t.Logf("%d waiting Lockers, each Acquire cut off %d times: at most %d server sessions at once", lockers, each, sessions.Load())
	left, err := queuedIn(db, table, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%d entries of waiters that gave up are still queued", len(left))
	}
	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	got := acquireAndRelease(ctx, waiter, key)
	time.Sleep(500 * time.Millisecond) // it tried, and waits
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, got, released, within, "the next waiter after the storm")
}
