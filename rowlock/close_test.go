package rowlock_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestCloseStopsServerWait: an Acquire of the closed Locker that waits in
// the database's lock queue is stopped there too, returns ErrClosed and
// ErrNotAcquired, and leaves no statement waiting and no connection in use
// once Close returns.
func TestCloseStopsServerWait(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := lockTable(t, db)
		held, err := newLocker(t, db, rowlock.WithTable(table)).Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		pool := testdb.Fresh(t, db.Dialect, 0)
		l := newLocker(t, pool, rowlock.WithTable(table))
		errc := make(chan error, 1)
		go func() {
			lease, err := l.Acquire(ctx, "k")
			if err == nil {
				lease.Release(ctx)
			}
			errc <- err
		}()
		waitForWaiter(t, db, table)
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		select {
		case err := <-errc:
			if !errors.Is(err, sqllock.ErrClosed) || !errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), `"k"`) {
				t.Fatalf("Acquire waiting in the server across Close = %v, want ErrClosed and ErrNotAcquired naming the key", err)
			}
		case <-time.After(10 * time.Second):
			held.Release(ctx) // lets the waiter through, so the test can end
			<-errc
			t.Fatal("Close did not stop an Acquire waiting in the server")
		}
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		// Close returns once the stopped wait's session is gone.
		if n := waiting(t, db, table); n > 0 {
			t.Fatalf("%d statements still waiting on %s after Close returned", n, table)
		}
		if n := pool.Stats().InUse; n > 0 {
			t.Fatalf("%d connections still in use after Close returned", n)
		}
	})
}

// TestCloseRollsBack: Close frees the keys of the leases it holds by
// rolling back their transactions: their work is undone, the key is free
// at once, the lease ends as lost with the cause, and the caller's *sql.DB
// stays open.
func TestCloseRollsBack(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		table := stockTable(t, db, 1)
		l := newLocker(t, db)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// Before the table's drop, which a lease left open would block.
		t.Cleanup(func() { lease.(*rowlock.Lease).Rollback(ctx) })
		if _, err := lease.(*rowlock.Lease).Tx().ExecContext(ctx, "UPDATE "+table+" SET qty = 7"); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case <-lease.Done():
		default:
			t.Fatal("Done() open after Close returned")
		}
		var qty int64
		if err := db.QueryRowContext(ctx, "SELECT qty FROM "+table).Scan(&qty); err != nil {
			t.Fatalf("the *sql.DB after Close: %v", err)
		}
		if qty != 1000 {
			t.Fatalf("qty after Close = %d, want 1000: the lease's work was not rolled back", qty)
		}
		next, err := newLocker(t, db).TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("key not free after Close: %v", err)
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
		err = lease.Release(ctx)
		if !errors.Is(err, sqllock.ErrLockLost) || !strings.Contains(err.Error(), "the Locker was closed") || !strings.Contains(err.Error(), key) {
			t.Fatalf("Release of a lease ended by Close = %v, want ErrLockLost naming the key and the cause", err)
		}
		if err := lease.(*rowlock.Lease).Rollback(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Fatalf("Rollback after Release = %v, want ErrReleased", err)
		}
	})
}

// ourGoroutines returns the stacks of the goroutines running rowlock's
// code that no test started.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var ours []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if strings.Contains(s, "sqllock/rowlock.") && !strings.Contains(s, "rowlock_test.") {
			ours = append(ours, s)
		}
	}
	return ours
}

// TestCloseStopsBackground: when Close returns, the monitor, the kills of
// stopped MariaDB waits and the rollbacks are over: no goroutine of the
// Locker is left.
func TestCloseStopsBackground(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := lockTable(t, db)
		l := newLocker(t, db, rowlock.WithTable(table), rowlock.WithCheckInterval(10*time.Millisecond))
		// "busy" is held by a plain transaction, which runs no goroutine of
		// ours: its row made first by l.
		first, err := l.Acquire(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		ph := map[sqllock.Dialect]string{sqllock.Postgres: "$1", sqllock.MariaDB: "?"}[db.Dialect]
		if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE lock_key = "+ph+" FOR UPDATE", "busy"); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "c"} {
			lease, err := l.Acquire(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			// Before the table's drop, which a lease left open would block.
			t.Cleanup(func() { lease.Release(ctx) })
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			lease, err := l.Acquire(ctx, "busy")
			if err == nil {
				lease.Release(ctx)
			}
			if !errors.Is(err, sqllock.ErrClosed) {
				t.Errorf("Acquire across Close = %v, want ErrClosed", err)
			}
		})
		waitForWaiter(t, db, table)
		time.Sleep(30 * time.Millisecond) // a few monitor checks
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if left := ourGoroutines(); len(left) > 0 {
			t.Errorf("%d goroutines of the closed Locker still running; the first:\n%s", len(left), left[0])
		}
		if err := tx.Rollback(); err != nil { // lets an unstopped waiter through
			t.Fatal(err)
		}
		wg.Wait()
	})
}

// TestCloseRace: Close while several goroutines take turns on a key (some
// waiting in the server, one holding it, grants landing as Close runs)
// leaves every lease handed out ended and the key free for others.
func TestCloseRace(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		for round := range 10 {
			key := locktest.Key(t)
			l := newLocker(t, db)
			var mu sync.Mutex
			var got []sqllock.Lease
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for {
						lease, err := l.Acquire(ctx, key)
						if err != nil {
							if !errors.Is(err, sqllock.ErrClosed) {
								t.Errorf("Acquire = %v, want ErrClosed once closed", err)
							}
							return
						}
						mu.Lock()
						got = append(got, lease)
						mu.Unlock()
						time.Sleep(time.Millisecond)
						if err := lease.Release(ctx); err != nil && !errors.Is(err, sqllock.ErrLockLost) {
							t.Errorf("Release = %v", err)
						}
					}
				})
			}
			time.Sleep(time.Duration(5+round*7) * time.Millisecond)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			for _, lease := range got {
				select {
				case <-lease.Done():
				default:
					t.Fatalf("round %d: a lease of the closed Locker still open (token %d)", round, lease.Token())
				}
			}
			next, err := newLocker(t, db).TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("round %d: key not free after Close: %v", round, err)
			}
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
