package advisory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestCloseWakesPoller: an Acquire polling for a key held elsewhere, deep in
// its backoff, returns as soon as its Locker is closed, with ErrClosed.
func TestCloseWakesPoller(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		holder := newLocker(t, db)
		lease, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		l, err := advisory.New(db.DB, db.Dialect, advisory.WithMaxBackoff(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctx, key)
			done <- err
		}()
		time.Sleep(1500 * time.Millisecond) // the pauses have grown past 250ms
		start := time.Now()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, sqllock.ErrClosed) || !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Errorf("Acquire across Close = %v, want ErrClosed and ErrNotAcquired", err)
			}
			if !strings.Contains(err.Error(), key) {
				t.Errorf("error %q does not name the key", err)
			}
			if d := time.Since(start); d > 250*time.Millisecond {
				t.Errorf("Acquire returned %v after Close, want at once", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not wake a polling Acquire")
		}
	})
}

// TestCloseReleases: Close frees the server locks and ends the leases as
// lost, says why, refuses every later acquisition with ErrClosed, and is
// idempotent.
func TestCloseReleases(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		l, err := advisory.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lease.Done():
		default:
			t.Fatal("lease not ended by Close")
		}
		if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) || !strings.Contains(err.Error(), "the Locker was closed") {
			t.Errorf("Err() after Close = %v, want ErrLockLost saying the Locker was closed", err)
		}
		if ids := holders(t, db, key); len(ids) != 0 {
			t.Fatalf("%q still held by %v after Close", key, ids)
		}
		for name, f := range map[string]func(context.Context, string) (sqllock.Lease, error){
			"TryAcquire": l.TryAcquire, "AcquireShared": l.AcquireShared,
		} {
			_, err := f(ctx, key)
			want := sqllock.ErrClosed
			if name == "AcquireShared" && db.Dialect.IsMySQL() {
				want = sqllock.ErrUnsupported
			}
			if !errors.Is(err, want) {
				t.Errorf("%s after Close = %v, want %v", name, err, want)
			}
		}
		if db.Dialect == sqllock.Postgres {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := l.AcquireTx(ctx, tx, key); !errors.Is(err, sqllock.ErrClosed) || !strings.Contains(err.Error(), key) {
				t.Errorf("AcquireTx after Close = %v, want ErrClosed naming the key", err)
			}
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Release after Close = %v", err)
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})
}

// TestCloseClosesStatements: the statements a Locker prepared on its
// pinned session are closed with it, not left on the pooled connection the
// session goes back to.
func TestCloseClosesStatements(t *testing.T) {
	forEach(t, func(t *testing.T, shared *testdb.DB) {
		db := testdb.Fresh(t, shared.Dialect, 1) // one connection: the session's
		ctx := ctxT(t)
		open := func() int {
			t.Helper()
			var n int
			var err error
			if db.Dialect.IsMySQL() {
				var prepared, closed int
				var name string
				err = db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &prepared)
				if err == nil {
					err = db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_close'").Scan(&name, &closed)
				}
				n = prepared - closed
			} else {
				// The driver's own statement cache (stmtcache_*) is not ours.
				err = db.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE strpos(statement, $1) > 0 AND name NOT LIKE 'stmtcache%'", "sqllock_next_token").Scan(&n)
			}
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := open()
		l, err := advisory.New(db.DB, db.Dialect, advisory.WithSessions(1))
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(ctx, locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if n := open(); n != before {
			t.Errorf("%d statements left prepared on the session after Close, want %d", n, before)
		}
	})
}
