package optimistic_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// version reads key's stored version; 0 when it has no row.
func version(t *testing.T, db *testdb.DB, key string) int64 {
	t.Helper()
	var v int64
	rows, err := db.QueryContext(ctxT(t), rebind(db.Dialect, "SELECT version FROM sqllock_versions WHERE lock_key = ?"), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// TestCloseEndsLeases: Close ends the live leases as lost and says why,
// leaves leases that had already ended as they were, writes nothing to
// the version table, refuses later acquisitions with ErrClosed naming the
// strategy and the key, is idempotent and leaves the *sql.DB open.
func TestCloseEndsLeases(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		l, err := optimistic.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		live, released, stale, refused := locktest.Key(t), locktest.Key(t), locktest.Key(t), locktest.Key(t)
		a, err := l.Acquire(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.Acquire(ctx, released)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
		c, err := l.Acquire(ctx, stale)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(ctx, stale); err != nil {
			t.Fatal(err)
		}
		if err := c.(*optimistic.Lease).Check(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Check of a stale lease = %v", err)
		}
		staleErr := c.Err()

		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case <-a.Done():
		default:
			t.Fatal("a live lease's Done() still open after Close")
		}
		if err := a.Err(); !errors.Is(err, sqllock.ErrLockLost) || !strings.Contains(err.Error(), "the Locker was closed") || !strings.Contains(err.Error(), live) {
			t.Errorf("live lease's Err() after Close = %v, want ErrLockLost naming the key and the Locker's close", err)
		}
		if err := b.Err(); !errors.Is(err, sqllock.ErrReleased) {
			t.Errorf("released lease's Err() after Close = %v, want ErrReleased still", err)
		}
		if err := c.Err(); err != staleErr {
			t.Errorf("stale lease's Err() after Close = %v, want its own loss %v still", err, staleErr)
		}
		if v := version(t, db, live); v != a.Token() {
			t.Errorf("Close changed the live key's version from %d to %d", a.Token(), v)
		}

		for name, f := range map[string]func(context.Context, string) (sqllock.Lease, error){"Acquire": l.Acquire, "TryAcquire": l.TryAcquire} {
			_, err := f(ctx, refused)
			if !errors.Is(err, sqllock.ErrClosed) || !strings.Contains(err.Error(), "optimistic") || !strings.Contains(err.Error(), refused) {
				t.Errorf("%s after Close = %v, want ErrClosed naming the strategy and the key", name, err)
			}
		}
		if v := version(t, db, refused); v != 0 {
			t.Errorf("a refused Acquire stamped version %d", v)
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}

		if err := a.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) || !strings.Contains(err.Error(), "the Locker was closed") {
			t.Errorf("first Release after Close = %v, want the loss", err)
		}
		if err := a.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Errorf("second Release after Close = %v, want ErrReleased", err)
		}
		if err := a.(*optimistic.Lease).Check(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Check after Close = %v, want the loss", err)
		}
		if v := version(t, db, live); v != a.Token() {
			t.Errorf("Release of a lease ended by Close changed the version from %d to %d", a.Token(), v)
		}

		// The *sql.DB is the caller's, and the key is anyone's to stamp.
		if err := db.PingContext(ctx); err != nil {
			t.Fatalf("the *sql.DB after Close: %v", err)
		}
		other, err := optimistic.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		next, err := other.Acquire(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		if next.Token() <= a.Token() {
			t.Errorf("token after Close %d not above %d", next.Token(), a.Token())
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseStatements: the Locker's, the Table's and the Counter's Close
// close the statements they prepared on the server (MariaDB counts them
// per session); a lease released after its Locker closed leaves none
// behind; a Table is usable after Close and its next Close closes what
// it prepared since.
func TestCloseStatements(t *testing.T) {
	ctx := ctxT(t)
	db := testdb.Fresh(t, sqllock.MariaDB, 1)
	base, sess := testdb.SessionStatements(t, db.DB)
	open := func(what string, want int64) {
		t.Helper()
		n, s := testdb.SessionStatements(t, db.DB)
		if s != sess {
			t.Fatalf("%s: the session changed (%d, was %d): the counts would compare two sessions", what, s, sess)
		}
		if n-base != want {
			t.Errorf("%s: %d statements open on the server, want %d", what, n-base, want)
		}
	}

	l, err := optimistic.New(db.DB, db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	key := locktest.Key(t)
	held, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := held.(*optimistic.Lease).Check(ctx); err != nil {
		t.Fatal(err)
	}
	done, err := l.Acquire(ctx, locktest.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Release(ctx); err != nil {
		t.Fatal(err)
	}
	open("Locker: stamp, read and release", 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	open("Locker closed", 0)
	if err := held.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
		t.Fatalf("Release after Close = %v", err)
	}
	open("lease released after Close", 0)

	tb := newTable(t, db, stockTable(t, db, 10))
	upd := func() {
		t.Helper()
		it, err := optimistic.Load[item](ctx, db.DB, tb, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := optimistic.Store(ctx, db.DB, tb, &it); err != nil {
			t.Fatal(err)
		}
	}
	upd()
	open("Table: load and update", 2)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	open("Table closed", 0)
	upd()
	open("Table used after Close", 2)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	open("Table closed again", 0)

	c, err := optimistic.NewCounter(db.DB, db.Dialect, counterTable(t, db), 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "x", 4); err != nil {
		t.Fatal(err)
	}
	if err := c.Take(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Total(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	open("Counter: take and total", 2)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	open("Counter closed", 0)
	if err := c.Take(ctx, "x"); err != nil {
		t.Fatalf("Take after Close: %v", err)
	}
	open("Counter used after Close", 0)
}
