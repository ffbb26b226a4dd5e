package optimistic_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// flaky is a test double for a handle: it fails the next reads and writes
// with the errors it is given, and passes everything else to the real
// database.
type flaky struct {
	sqllock.Querier
	readErr, writeErr     error
	failReads, failWrites atomic.Int32 // how many more to fail
	reads, writes         atomic.Int32 // calls seen, failed ones included
}

func (f *flaky) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	f.reads.Add(1)
	if f.failReads.Add(-1) >= 0 {
		return nil, f.readErr
	}
	return f.Querier.QueryContext(ctx, q, args...)
}

func (f *flaky) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	f.writes.Add(1)
	if strings.HasPrefix(q, "UPDATE") && f.failWrites.Add(-1) >= 0 {
		return nil, f.writeErr
	}
	return f.Querier.ExecContext(ctx, q, args...)
}

// flakyPool is a flaky *sql.DB: Modify sees a pool handle.
type flakyPool struct {
	*flaky
	db *sql.DB
}

func (f flakyPool) Driver() driver.Driver { return f.db.Driver() }

func newFlakyPool(db *sql.DB, readErr, writeErr error, failReads, failWrites int32) flakyPool {
	f := &flaky{Querier: db, readErr: readErr, writeErr: writeErr}
	f.failReads.Store(failReads)
	f.failWrites.Store(failWrites)
	return flakyPool{f, db}
}

// transientErr is the error d's driver returns for a deadlock or
// serialization failure; on SQLite a real SQLITE_BUSY.
func transientErr(t *testing.T, db *testdb.DB) error {
	t.Helper()
	var err error
	switch db.Dialect {
	case sqllock.Postgres:
		err = &pgconn.PgError{Severity: "ERROR", Code: "40001", Message: "could not serialize access due to concurrent update"}
	case sqllock.MariaDB, sqllock.MySQL:
		err = &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	default:
		err = sqliteBusy(t, db.Driver)
	}
	if !dberr.IsRetryable(err) {
		t.Fatalf("%v is not retryable: the test would prove nothing", err)
	}
	return err
}

// sqliteBusy makes SQLite refuse a second writer, with no busy timeout to
// hide it.
func sqliteBusy(t *testing.T, drv string) error {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "busy.db") + "?_pragma=busy_timeout(0)"
	a, err := sql.Open(drv, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sql.Open(drv, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := ctxT(t)
	if _, err := a.ExecContext(ctx, "CREATE TABLE x (a integer)"); err != nil {
		t.Fatal(err)
	}
	tx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_, err = b.ExecContext(ctx, "INSERT INTO x VALUES (2)")
	if err == nil {
		t.Fatal("a second SQLite writer was not refused")
	}
	return err
}

// permanentErr is the database's own error for a missing table: not
// transient.
func permanentErr(t *testing.T, db *testdb.DB) error {
	t.Helper()
	rows, err := db.QueryContext(ctxT(t), "SELECT 1 FROM "+uniqueName("opt_missing"))
	if err == nil {
		rows.Close()
		t.Fatal("a missing table was found")
	}
	if dberr.IsRetryable(err) {
		t.Fatalf("%v is retryable", err)
	}
	return err
}

var quick = optimistic.LimitAttempts(optimistic.ExponentialBackoff(time.Microsecond, time.Millisecond), 10)

// decrement is a Modify function that counts its calls.
func decrement(calls *int) func(*item) error {
	return func(it *item) error {
		*calls++
		it.Qty--
		return nil
	}
}

func wantStats(t *testing.T, what string, got, want optimistic.Stats) {
	t.Helper()
	if got != want {
		t.Errorf("%s: stats %+v, want %+v", what, got, want)
	}
}

// TestModifyRetriesTransient: on a pool, Modify retries the transient
// errors Retry retries, within the policy and the context, and says how
// many attempts it took.
func TestModifyRetriesTransient(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 100)
		tb := newTable(t, db, name)
		transient := transientErr(t, db)
		qty := int64(100)
		check := func(what string, wantQty, wantVer int64) {
			t.Helper()
			if q, v := readStock(t, db, name); q != wantQty || v != wantVer {
				t.Fatalf("%s: row qty %d version %d, want %d and %d", what, q, v, wantQty, wantVer)
			}
		}

		// Three failed writes, then success.
		h := newFlakyPool(db.DB, nil, transient, 0, 3)
		calls := 0
		got, st, err := optimistic.ModifyStats(ctx, h, tb, 1, quick, decrement(&calls))
		if err != nil {
			t.Fatalf("Modify after 3 transient write errors = %v", err)
		}
		wantStats(t, "3 failed writes", st, optimistic.Stats{Attempts: 4, Transient: 3})
		if calls != 4 || h.writes.Load() != 4 || got.Qty != qty-1 || got.Version != 2 {
			t.Fatalf("fn ran %d times, %d writes, returned %+v", calls, h.writes.Load(), got)
		}
		qty--
		check("3 failed writes", qty, 2)

		// Two failed reads, then success; fn only sees rows.
		h = newFlakyPool(db.DB, transient, nil, 2, 0)
		calls = 0
		_, st, err = optimistic.ModifyStats(ctx, h, tb, 1, quick, decrement(&calls))
		if err != nil || calls != 1 {
			t.Fatalf("Modify after 2 transient read errors = %v, fn ran %d times", err, calls)
		}
		wantStats(t, "2 failed reads", st, optimistic.Stats{Attempts: 3, Transient: 2})
		qty--
		check("2 failed reads", qty, 3)

		// A lost connection on a read is retried: reads can be repeated.
		h = newFlakyPool(db.DB, io.ErrUnexpectedEOF, nil, 1, 0)
		if _, st, err = optimistic.ModifyStats(ctx, h, tb, 1, quick, decrement(&calls)); err != nil {
			t.Fatalf("Modify after a lost connection on a read = %v", err)
		}
		wantStats(t, "lost connection on a read", st, optimistic.Stats{Attempts: 2, Transient: 1})
		qty--
		check("lost connection on a read", qty, 4)

		// A connection refused before the write was sent is retried.
		h = newFlakyPool(db.DB, nil, driver.ErrBadConn, 0, 1)
		if _, st, err = optimistic.ModifyStats(ctx, h, tb, 1, quick, decrement(&calls)); err != nil {
			t.Fatalf("Modify after ErrBadConn on a write = %v", err)
		}
		wantStats(t, "ErrBadConn on a write", st, optimistic.Stats{Attempts: 2, Transient: 1})
		qty--
		check("ErrBadConn on a write", qty, 5)

		// The policy bounds the retries; the error names the cause.
		h = newFlakyPool(db.DB, nil, transient, 0, 1000)
		calls = 0
		_, st, err = optimistic.ModifyStats(ctx, h, tb, 1, optimistic.LimitAttempts(optimistic.ExponentialBackoff(time.Microsecond, time.Millisecond), 3), decrement(&calls))
		if !errors.Is(err, transient) || !strings.Contains(err.Error(), "3 attempts") || calls != 3 {
			t.Fatalf("Modify with writes always failing = %v after %d calls, want the transient error after 3", err, calls)
		}
		wantStats(t, "policy exhausted", st, optimistic.Stats{Attempts: 3, Transient: 3})
		check("policy exhausted", qty, 5)

		// So does the context.
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, st, err = optimistic.ModifyStats(cctx, h, tb, 1, optimistic.ExponentialBackoff(10*time.Millisecond, 10*time.Millisecond), decrement(&calls))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Modify past its deadline = %v, want DeadlineExceeded", err)
		}
		// The deadline may strike during a pause or during a statement.
		if st.Attempts < 2 || st.Attempts > 25 || st.Transient < st.Attempts-1 {
			t.Errorf("Modify past its deadline: stats %+v", st)
		}
		check("deadline", qty, 5)

		// The caller's own error still ends Modify at once, between
		// transient failures.
		h = newFlakyPool(db.DB, nil, transient, 0, 1)
		errSoldOut := errors.New("sold out")
		calls = 0
		_, st, err = optimistic.ModifyStats(ctx, h, tb, 1, quick, func(it *item) error {
			if calls++; calls == 2 {
				return errSoldOut
			}
			it.Qty--
			return nil
		})
		if err != errSoldOut || calls != 2 {
			t.Fatalf("Modify = %v after %d calls, want the caller's error after 2", err, calls)
		}
		wantStats(t, "business stop", st, optimistic.Stats{Attempts: 2, Transient: 1})
		check("business stop", qty, 5)
	})
}

// TestModifyStopsOnPermanent: errors that would fail again, and writes that
// may have committed, end Modify after one attempt; so does any transient
// error inside the caller's transaction.
func TestModifyStopsOnPermanent(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 10)
		tb := newTable(t, db, name)
		patient := optimistic.LimitAttempts(optimistic.ExponentialBackoff(time.Microsecond, time.Millisecond), 100)
		for _, c := range []struct {
			what string
			err  error
		}{
			{"the database's error for a missing table", permanentErr(t, db)},
			{"a connection lost during the write", io.ErrUnexpectedEOF},
			{"an invalid MySQL connection", mysql.ErrInvalidConn},
		} {
			h := newFlakyPool(db.DB, nil, c.err, 0, 5)
			calls := 0
			_, st, err := optimistic.ModifyStats(ctx, h, tb, 1, patient, decrement(&calls))
			if !errors.Is(err, c.err) || calls != 1 || h.writes.Load() != 1 {
				t.Errorf("Modify failing with %s = %v after %d calls and %d writes, want that error after 1", c.what, err, calls, h.writes.Load())
			}
			wantStats(t, c.what, st, optimistic.Stats{Attempts: 1})
		}
		// A missing row is not retried either.
		h := newFlakyPool(db.DB, nil, nil, 0, 0)
		if _, st, err := optimistic.ModifyStats(ctx, h, tb, 99, patient, func(*item) error { return nil }); !errors.Is(err, sql.ErrNoRows) || h.reads.Load() != 1 {
			t.Errorf("Modify of a missing row = %v after %d reads", err, h.reads.Load())
		} else {
			wantStats(t, "missing row", st, optimistic.Stats{Attempts: 1})
		}

		// In a transaction a transient error is the caller's to handle.
		transient := transientErr(t, db)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		f := &flaky{Querier: tx, writeErr: transient}
		f.failWrites.Store(5)
		calls := 0
		_, st, err := optimistic.ModifyStats(ctx, f, tb, 1, patient, decrement(&calls))
		if !errors.Is(err, transient) || calls != 1 || f.writes.Load() != 1 {
			t.Errorf("Modify in a transaction = %v after %d calls and %d writes, want the transient error after 1", err, calls, f.writes.Load())
		}
		wantStats(t, "transaction", st, optimistic.Stats{Attempts: 1})
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if q, v := readStock(t, db, name); q != 10 || v != 1 {
			t.Fatalf("row changed: qty %d version %d", q, v)
		}
	})
}

// TestModifyStatsConflicts: a lost race is counted as a conflict.
func TestModifyStatsConflicts(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 10)
		tb := newTable(t, db, name)
		calls := 0
		got, st, err := optimistic.ModifyStats(ctx, db.DB, tb, 1, quick, func(it *item) error {
			if calls++; calls == 1 {
				// Another writer gets there first.
				exec(t, db, "UPDATE "+name+" SET qty = qty - 1, version = version + 1 WHERE id = 1")
			}
			it.Qty--
			return nil
		})
		if err != nil || calls != 2 || got.Qty != 8 || got.Version != 3 {
			t.Fatalf("Modify = %+v, %v after %d calls", got, err, calls)
		}
		wantStats(t, "one lost race", st, optimistic.Stats{Attempts: 2, Conflicts: 1})
		// Modify and ModifyStats agree.
		if got, err := optimistic.Modify(ctx, db.DB, tb, 1, quick, decrement(&calls)); err != nil || got.Qty != 7 {
			t.Fatalf("Modify = %+v, %v", got, err)
		}
	})
}

func TestRetryStats(t *testing.T) {
	ctx := ctxT(t)
	transient := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	calls := 0
	st, err := optimistic.RetryStats(ctx, quick, func(context.Context) error {
		switch calls++; calls {
		case 1:
			return transient
		case 2:
			return sqllock.ErrConflict
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("RetryStats = %v after %d calls", err, calls)
	}
	wantStats(t, "success on the third", st, optimistic.Stats{Attempts: 3, Conflicts: 1, Transient: 1})

	st, err = optimistic.RetryStats(ctx, optimistic.LimitAttempts(quick, 4), func(context.Context) error { return sqllock.ErrConflict })
	if !errors.Is(err, sqllock.ErrConflict) {
		t.Fatalf("RetryStats = %v", err)
	}
	wantStats(t, "gave up", st, optimistic.Stats{Attempts: 4, Conflicts: 4})

	boom := errors.New("boom")
	st, err = optimistic.RetryStats(ctx, quick, func(context.Context) error { return boom })
	if err != boom {
		t.Fatalf("RetryStats = %v", err)
	}
	wantStats(t, "permanent", st, optimistic.Stats{Attempts: 1})

	st, err = optimistic.RetryStats(ctx, quick, func(context.Context) error { return optimistic.Stop(transient) })
	if err != transient {
		t.Fatalf("RetryStats = %v", err)
	}
	wantStats(t, "stopped", st, optimistic.Stats{Attempts: 1})

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	st, err = optimistic.RetryStats(cctx, quick, func(context.Context) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RetryStats on a cancelled context = %v", err)
	}
	wantStats(t, "cancelled", st, optimistic.Stats{})
}
