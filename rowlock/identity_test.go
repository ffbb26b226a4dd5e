package rowlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestReusedSessionID: a lease whose session id now names another live
// session (MariaDB numbers connections from 1 again after a restart,
// PostgreSQL reuses pids) is dead. Matching the id alone would keep it
// alive forever.
func TestReusedSessionID(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		l := newLocker(t, db)
		lease, err := l.Acquire(ctx, locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		s := lease.(*rowlock.Lease)
		alive, err := rowlock.Alive(l, s, rowlock.EarlierLife(s))
		if err != nil {
			t.Fatal(err)
		}
		if !alive[0] {
			t.Error("a held lease checked as dead")
		}
		if alive[1] {
			t.Error("a lease of an earlier life of a live session id checked as alive")
		}
	})
}

// TestTxReplacedOutside: on PostgreSQL, a holder that ends the transaction
// with raw SQL and opens another on the same session has freed the key;
// the session is alive and in a transaction, but not the lease's one.
// (MariaDB shows no transactions without the PROCESS privilege: there the
// monitor watches sessions only.)
func TestTxReplacedOutside(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := ctxT(t)
	key := locktest.Key(t)
	l := newLocker(t, db, rowlock.WithCheckInterval(50*time.Millisecond))
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	tx := lease.(*rowlock.Lease).Tx()
	for _, q := range []string{"COMMIT", "BEGIN", "SELECT pg_current_xact_id()"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	select {
	case <-lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease not lost 5s after its transaction was replaced")
	}
	if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
		t.Fatalf("Err() = %v, want ErrLockLost", err)
	}
	next, err := newLocker(t, db).TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("key not free after the loss: %v", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKeysCompareBytes: keys that differ only in case or trailing space are
// different rows, so different locks, in the shipped table and in one made
// from Schema.
func TestKeysCompareBytes(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		for _, table := range []string{rowlock.DefaultTable, lockTable(t, db)} {
			l := newLocker(t, db, rowlock.WithTable(table))
			base := locktest.Key(t)
			for _, pair := range [][2]string{{"Order-7", "order-7"}, {"order-7", "order-7 "}} {
				a, err := l.TryAcquire(ctx, base+"/"+pair[0])
				if err != nil {
					t.Fatal(err)
				}
				b, err := l.TryAcquire(ctx, base+"/"+pair[1])
				if err != nil {
					t.Errorf("%s: %q refused while only %q is held: %v", table, pair[1], pair[0], err)
				} else if err := b.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if err := a.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
