package tablelock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// newLocker returns a Locker closed when the test ends.
func newLocker(t testing.TB, db *testdb.DB, opts ...tablelock.Option) *tablelock.Locker {
	t.Helper()
	l, err := tablelock.New(db.DB, db.Dialect, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// deleteRow plays an administrator removing a held lock by hand.
func deleteRow(t testing.TB, db *testdb.DB, key string) {
	t.Helper()
	q := map[sqllock.Dialect]string{
		sqllock.Postgres: "DELETE FROM sqllock_locks WHERE lock_key = $1",
		sqllock.MariaDB:  "DELETE FROM sqllock_locks WHERE lock_key = ?", sqllock.MySQL: "DELETE FROM sqllock_locks WHERE lock_key = ?",
		sqllock.SQLite: "DELETE FROM sqllock_locks WHERE lock_key = ?",
	}[db.Dialect]
	res, err := db.ExecContext(context.Background(), q, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("deleted %d rows for %q, want 1", n, key)
	}
}

func TestConformance(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) { conformance(t, db) })
}

// conformance runs the suite every Locker passes on Lockers over db with
// opts and a 900ms TTL; a lease is stolen by deleting its row.
func conformance(t *testing.T, db *testdb.DB, opts ...tablelock.Option) {
	locktest.Run(t, locktest.Target{
		DB: db,
		New: func(t testing.TB) sqllock.Locker {
			return newLocker(t, db, append([]tablelock.Option{tablelock.WithTTL(900 * time.Millisecond)}, opts...)...)
		},
		Steal:      func(t testing.TB, l sqllock.Lease) { deleteRow(t, db, l.Key()) },
		LossWithin: 2 * time.Second,
		Reentrant:  true,
		Exclusive:  true,
		Kept:       sqliteLane(db),
	})
}

// sqliteLane is how many connections a Locker over db keeps of its own:
// one on SQLite (its lane), where the pool has no limit.
func sqliteLane(db *testdb.DB) int {
	if db.Dialect == sqllock.SQLite && db.Stats().MaxOpenConnections == 0 {
		return 1
	}
	return 0
}

func TestSmoke(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l := newLocker(t, db)
		key := locktest.Key(t)
		a, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.TryAcquire(ctx, key)
		fmt.Println(a.Token(), err)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// acquireAndRelease runs l.Acquire of key in the background, as a waiter
// of another process would, releases what it got at once, and sends how
// that went.
func acquireAndRelease(ctx context.Context, l *tablelock.Locker, key string) <-chan error {
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, key)
		if err == nil {
			err = lease.Release(context.Background())
		}
		got <- err
	}()
	return got
}

// served fails t unless the background acquisition got succeeds within
// 20s; otherwise it says what went wrong.
func served(t *testing.T, got <-chan error, otherwise string) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal(otherwise)
	}
}
