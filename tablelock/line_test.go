package tablelock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// lineWaits counts the sessions of this database blocked in a key's line
// (locktable.Gate.Line): the line's statement, in the "User lock" state.
func lineWaits(t *testing.T, db *testdb.DB) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND STATE = 'User lock' AND INFO = 'SELECT GET_LOCK(?, ?)'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLineServesInOrder: on MariaDB the waiters for a key, each in a
// Locker and a pool of its own (as in processes of their own), are served
// in the order they came: the first blocks on the holder's gate, the
// others in the key's line, and each leaves the line once it took the
// key. Without the line they raced for it after the release (one order
// in 120 by chance).
func TestLineServesInOrder(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	table := privateTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := locktest.Key(t)
	holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(2*time.Minute))
	a, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the holder keeps its gate", func() bool { return gateKept(t, db, table, key) })

	const waiters = 6
	var (
		mu    sync.Mutex
		order []int
		in    atomic.Int32 // holders at once, among the waiters
		errs  = make(chan error, waiters)
	)
	for i := range waiters {
		w := newLocker(t, testdb.Fresh(t, sqllock.MariaDB, 0), tablelock.WithTable(table))
		go func() {
			l, err := w.Acquire(ctx, key)
			if err != nil {
				errs <- err
				return
			}
			if n := in.Add(1); n != 1 {
				err = fmt.Errorf("waiter %d holds with %d others", i, n-1)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			in.Add(-1)
			if rerr := l.Release(ctx); err == nil {
				err = rerr
			}
			errs <- err
		}()
		eventually(t, fmt.Sprintf("waiter %d waits", i), func() bool { return gateWaits(t, db)+lineWaits(t, db) == i+1 })
	}
	if n := lineWaits(t, db); n != waiters-1 {
		t.Fatalf("%d waiters in line, want %d: the first blocks on the gate, the others in line", n, waiters-1)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("served in the order %v, want the order of arrival", order)
		}
	}
	if n := lineWaits(t, db); n != 0 {
		t.Fatalf("%d line waits left on the server", n)
	}
}

// TestLineBounded: a line whose first never leaves (a process stopped
// while first in line, its session alive) costs a waiter at most the
// wait bound: the waiter then looks at the row as without a line, and
// takes the key once it is free.
func TestLineBounded(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	table := privateTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := locktest.Key(t)
	stuck, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	var got int
	if err := stuck.QueryRowContext(ctx, `SELECT GET_LOCK(?, 0)`, locktable.LineName(table, key)).Scan(&got); err != nil || got != 1 {
		t.Fatalf("taking the line's lock: %v, %d", err, got)
	}
	holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute))
	a, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	w := newLocker(t, testdb.Fresh(t, sqllock.MariaDB, 0), tablelock.WithTable(table))
	done := acquireAndRelease(ctx, w, key)
	eventually(t, "the waiter waits in line", func() bool { return lineWaits(t, db) == 1 })
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, done, time.Now(), 3*time.Second, "a waiter behind a line that never moves")
}
