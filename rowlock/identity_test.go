package rowlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
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

// TestLifeIsServerStart: on MariaDB a lease's life is exactly the server's
// start as the monitor reads it (UNIX_TIMESTAMP() - Uptime), also once the
// server has served 2^24 UUID_SHORT() calls. A life read from UUID_SHORT()'s
// start-time field drifts up by one each time its counter carries into it;
// enough drift, and a lease of a server that restarted soon after looks
// alive to the monitor when its reused connection id names a new session.
func TestLifeIsServerStart(t *testing.T) {
	if testing.Short() {
		t.Skip("a few million UUID_SHORT() calls on the server")
	}
	db := testdb.Open(t, sqllock.MariaDB)
	ctx := ctxT(t)
	// Make UUID_SHORT()'s 24-bit counter carry at least once (a few million
	// calls, a second or two of server time).
	var counter int64
	if err := db.QueryRowContext(ctx, "SELECT UUID_SHORT() & 0xFFFFFF").Scan(&counter); err != nil {
		t.Fatal(err)
	}
	var last int64
	q := fmt.Sprintf("SELECT MAX(UUID_SHORT()) FROM seq_1_to_%d", 1<<24-counter)
	if err := db.QueryRowContext(ctx, q).Scan(&last); err != nil {
		t.Fatal(err)
	}

	lease, err := newLocker(t, db).Acquire(ctx, locktest.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	var start int64
	err = db.QueryRowContext(ctx, `SELECT UNIX_TIMESTAMP() - CAST((SELECT VARIABLE_VALUE
	FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)`).Scan(&start)
	if err != nil {
		t.Fatal(err)
	}
	if life := rowlock.Life(lease.(*rowlock.Lease)); life != start {
		t.Fatalf("lease life %d, server start %d: off by %d s", life, start, life-start)
	}
}
