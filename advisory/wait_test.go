package advisory_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// waitQueued polls until n waits of l for key are queued in the server.
func waitQueued(t *testing.T, db *testdb.DB, l *advisory.Locker, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queued(t, db, l, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits for %q queued in the server, want %d", queued(t, db, l, key), key, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// queued counts l's waits for key in the server: ungranted advisory locks
// on PostgreSQL; on MariaDB, whose process list shows a prepared
// statement without its arguments, l's wait sessions blocked in GET_LOCK.
func queued(t *testing.T, db *testdb.DB, l *advisory.Locker, key string) int {
	t.Helper()
	if !db.Dialect.IsMySQL() {
		return queuedInServer(t, db, []string{key})
	}
	n := 0
	for _, id := range advisory.WaitBackends(l) {
		var c int
		err := db.QueryRow(`SELECT count(*) FROM information_schema.PROCESSLIST
WHERE ID = ? AND STATE = 'User lock' AND INFO LIKE '%GET_LOCK%'`, id).Scan(&c)
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}

// TestWaitInServer: a blocked Acquire waits in the server on a session of
// its own and is granted the key at the holder's release, with a larger
// token, on that session; its release frees the key.
func TestWaitInServer(t *testing.T) {
	forEach(t, func(t *testing.T, shared *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		holder := newLocker(t, testdb.Fresh(t, shared.Dialect, 0))
		waiter := newLocker(t, testdb.Fresh(t, shared.Dialect, 0))
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		holderSession := holders(t, shared, key)
		type result struct {
			lease sqllock.Lease
			err   error
		}
		got := make(chan result, 1)
		go func() {
			lease, err := waiter.Acquire(ctx, key)
			got <- result{lease, err}
		}()
		waitQueued(t, shared, waiter, key, 1)
		select {
		case r := <-got:
			t.Fatalf("Acquire returned while the key was held: %v", r.err)
		default:
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var r result
		select {
		case r = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not granted the key within 10s of the release")
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.lease.Token() <= held.Token() {
			t.Errorf("waiter's token %d not above the holder's %d", r.lease.Token(), held.Token())
		}
		now := holders(t, shared, key)
		if len(now) != 1 || slices.Equal(now, holderSession) {
			t.Errorf("holders after the handoff %v, before %v: want one, another session", now, holderSession)
		}
		if q := queued(t, shared, waiter, key); q != 0 {
			t.Errorf("%d waits still queued", q)
		}
		if err := r.lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if h := holders(t, shared, key); len(h) != 0 {
			t.Errorf("key still held by %v after the waiter's release", h)
		}
	})
}

// TestWaitInServerEnds: a wait in the server that ends, by its context or
// by Close, is taken off the server's queue and leaves no lock behind: the
// key stays the holder's, and is free for anyone after its release.
func TestWaitInServerEnds(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			forEach(t, func(t *testing.T, shared *testdb.DB) {
				ctx, key := ctxT(t), locktest.Key(t)
				holder := newLocker(t, testdb.Fresh(t, shared.Dialect, 0))
				wdb := testdb.Fresh(t, shared.Dialect, 0)
				waiter, err := advisory.New(wdb.DB, wdb.Dialect)
				if err != nil {
					t.Fatal(err)
				}
				defer waiter.Close()
				held, err := holder.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				before := holders(t, shared, key)
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				got := make(chan error, 1)
				go func() {
					_, err := waiter.Acquire(wctx, key)
					got <- err
				}()
				waitQueued(t, shared, waiter, key, 1)
				waits := advisory.WaitBackends(waiter)
				want := error(context.Canceled)
				if how == "cancel" {
					cancel()
				} else {
					want = sqllock.ErrClosed
					go waiter.Close()
				}
				select {
				case err = <-got:
				case <-time.After(10 * time.Second):
					t.Fatalf("Acquire still waiting 10s after the %s", how)
				}
				if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, want) {
					t.Fatalf("Acquire = %v, want ErrNotAcquired and %v", err, want)
				}
				waitQueued(t, shared, waiter, key, 0)
				gone(t, shared, waits)
				if now := holders(t, shared, key); !slices.Equal(now, before) {
					t.Errorf("holders %v after the %s, want the holder's %v", now, how, before)
				}
				if err := held.Release(ctx); err != nil {
					t.Fatal(err)
				}
				other := newLocker(t, shared)
				lease, err := other.TryAcquire(ctx, key)
				if err != nil {
					t.Fatalf("the key is not free after the holder's release: %v", err)
				}
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if err := waiter.Close(); err != nil {
					t.Fatal(err)
				}
				waitIdle(t, wdb)
			})
		})
	}
}

// TestWaitSessionsContend: Lockers on pools of their own, as separate
// processes would be, contend for one key through their wait sessions; a
// shared counter shows no two held it at once, and the tokens rise in the
// order the key was held.
func TestWaitSessionsContend(t *testing.T) {
	forEach(t, func(t *testing.T, shared *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		const lockers, workers, rounds = 4, 3, 25
		var inside atomic.Int32
		var mu sync.Mutex
		var counter int
		var last int64
		var wg sync.WaitGroup
		for range lockers {
			l := newLocker(t, testdb.Fresh(t, shared.Dialect, 0))
			for range workers {
				wg.Go(func() {
					for range rounds {
						lease, err := l.Acquire(ctx, key)
						if err != nil {
							t.Error(err)
							return
						}
						if n := inside.Add(1); n != 1 {
							t.Errorf("%d holders at once", n)
						}
						mu.Lock()
						if lease.Token() <= last {
							t.Errorf("token %d after %d", lease.Token(), last)
						}
						last = lease.Token()
						counter++
						mu.Unlock()
						time.Sleep(100 * time.Microsecond)
						inside.Add(-1)
						if err := lease.Release(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		if counter != lockers*workers*rounds {
			t.Fatalf("counter %d, want %d", counter, lockers*workers*rounds)
		}
		if q := queuedInServer(t, shared, []string{key}); q != 0 {
			t.Errorf("%d waits left queued", q)
		}
	})
}

// gone polls until the server has no session with one of ids: a wait
// session whose wait ended is closed, not pooled.
func gone(t *testing.T, db *testdb.DB, ids []int64) {
	t.Helper()
	q := "SELECT count(*) FROM pg_stat_activity WHERE pid = $1"
	if db.Dialect.IsMySQL() {
		q = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = ?"
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for {
			var n int
			if err := db.QueryRow(q, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("wait session %d still open", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestCancelBeforeWaitReachesServer: a wait whose context ends before its
// statement reaches the server still ends at once. The server ignores a
// cancel that comes while the session is idle, so the first interrupt is
// lost; the guard sends it again until the statement has returned. With a
// single interrupt the Acquire would wait for the holder's release.
func TestCancelBeforeWaitReachesServer(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		holder, waiter := newLocker(t, db), newLocker(t, db)
		key := locktest.Key(t)
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		advisory.SetBeforeWait(t, func() {
			cancel()
			time.Sleep(50 * time.Millisecond) // the first interrupt is over before the statement is sent
		})
		start := time.Now()
		_, err = waiter.Acquire(wctx, key)
		took := time.Since(start)
		if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire = %v, want ErrNotAcquired and context.Canceled", err)
		}
		if took > 3*time.Second {
			t.Errorf("cancelled wait ended after %v", took)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lease, err := waiter.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("after the cancelled wait: %v", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
