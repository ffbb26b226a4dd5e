package optimistic_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName returns a table name no other test (or engineer) uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%016x", prefix, rand.Uint64())
}

// exec runs a statement written with ? placeholders, rewritten to $n on
// PostgreSQL.
func exec(t testing.TB, db *testdb.DB, q string, args ...any) sql.Result {
	t.Helper()
	res, err := db.ExecContext(context.Background(), rebind(db.Dialect, q), args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

func rebind(d sqllock.Dialect, q string) string {
	if d != sqllock.Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// stockTable creates a stock table (id, qty, version, name) holding one row,
// id 1, with qty units; it is dropped when the test ends.
func stockTable(t testing.TB, db *testdb.DB, qty int64) string {
	t.Helper()
	name := uniqueName("opt_stock")
	exec(t, db, "CREATE TABLE "+name+" (id integer NOT NULL PRIMARY KEY, qty bigint NOT NULL, version bigint NOT NULL, label varchar(64) NOT NULL)")
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE "+name) })
	exec(t, db, "INSERT INTO "+name+" (id, qty, version, label) VALUES (1, ?, 1, 'widget')", qty)
	return name
}

func readStock(t testing.TB, db *testdb.DB, table string) (qty, version int64) {
	t.Helper()
	err := db.QueryRowContext(context.Background(), "SELECT qty, version FROM "+table+" WHERE id = 1").Scan(&qty, &version)
	if err != nil {
		t.Fatal(err)
	}
	return qty, version
}

type item struct {
	ID      int64  `db:"id"`
	Qty     int64  `db:"qty"`
	Version int64  `db:"version"`
	Label   string `db:"label"`
	Note    string `db:"-"`
}

func newTable(t testing.TB, db *testdb.DB, name string, opts ...optimistic.TableOption) *optimistic.Table {
	t.Helper()
	tb, err := optimistic.NewTable(db.Dialect, name, "id", "version", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

func TestConformance(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		locktest.Run(t, locktest.Target{
			DB: db,
			New: func(t testing.TB) sqllock.Locker {
				l, err := optimistic.New(db.DB, db.Dialect)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			},
			Exclusive: false, // conflict detection, not exclusion
		})
	})
}

func TestCompareAndSwap(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 10)
		tb := newTable(t, db, name)
		if err := tb.Check(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
		v, err := tb.Update(ctx, db.DB, 1, 1, optimistic.Set{Column: "qty", Value: 9})
		if err != nil || v != 2 {
			t.Fatalf("Update at the current version = %d, %v; want 2, nil", v, err)
		}
		// A second writer still holding version 1 lost the race.
		_, err = tb.Update(ctx, db.DB, 1, 1, optimistic.Set{Column: "qty", Value: 100})
		if !errors.Is(err, sqllock.ErrConflict) {
			t.Fatalf("stale Update = %v, want ErrConflict", err)
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name the table", err)
		}
		if qty, ver := readStock(t, db, name); qty != 9 || ver != 2 {
			t.Fatalf("row = qty %d version %d, want 9 and 2", qty, ver)
		}
		// Inside a transaction: a rollback undoes the bump too.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Update(ctx, tx, 1, 2, optimistic.Set{Column: "qty", Value: 8}, optimistic.Set{Column: "label", Value: "gadget"}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if qty, ver := readStock(t, db, name); qty != 9 || ver != 2 {
			t.Fatalf("after rollback qty %d version %d, want 9 and 2", qty, ver)
		}
		// A pinned connection works the same.
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if v, err := tb.Update(ctx, conn, 1, 2, optimistic.Set{Column: "qty", Value: 7}); err != nil || v != 3 {
			t.Fatalf("Update on *sql.Conn = %d, %v", v, err)
		}
	})
}

func TestBadInput(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 10)
		for _, tc := range []struct{ table, id, version string }{
			{"", "id", "version"},
			{"stock; DROP TABLE x", "id", "version"},
			{name, "id", ""},
			{name, "id", "version`"},
			{name, "a.b", "version"},
			{name, "id", "ID"},
			{"a.b.c", "id", "version"},
		} {
			if _, err := optimistic.NewTable(db.Dialect, tc.table, tc.id, tc.version); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("NewTable(%q, %q, %q) = %v, want ErrInvalidOption", tc.table, tc.id, tc.version, err)
			}
		}

		// A version column the table does not have: Check says so, and an
		// Update fails and writes nothing.
		noVer := newTable(t, db, name)
		bad, err := optimistic.NewTable(db.Dialect, name, "id", "revision")
		if err != nil {
			t.Fatal(err)
		}
		err = bad.Check(ctx, db.DB)
		if err == nil || !strings.Contains(err.Error(), `"revision"`) {
			t.Fatalf("Check with a missing version column = %v, want an error naming it", err)
		}
		if _, err := bad.Update(ctx, db.DB, 1, 1, optimistic.Set{Column: "qty", Value: 0}); err == nil {
			t.Fatal("Update with a missing version column succeeded")
		}
		// Bad assignments are refused before reaching the database.
		for _, sets := range [][]optimistic.Set{
			nil,
			{{Column: "version", Value: 5}},
			{{Column: "id", Value: 5}},
			{{Column: "qty = 0, label", Value: 5}},
			{{Column: "qty", Value: 1}, {Column: "QTY", Value: 2}},
		} {
			if _, err := noVer.Update(ctx, db.DB, 1, 1, sets...); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("Update(%v) = %v, want ErrInvalidOption", sets, err)
			}
		}
		// A struct without the version field.
		type noVersion struct {
			ID  int64 `db:"id"`
			Qty int64 `db:"qty"`
		}
		if _, err := optimistic.Modify(ctx, db.DB, noVer, 1, nil, func(*noVersion) error { return nil }); !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), "version") {
			t.Errorf("Modify of a struct without a version field = %v", err)
		}
		// Zero attempts.
		calls := 0
		err = optimistic.Retry(ctx, optimistic.LimitAttempts(optimistic.NoRetry(), 0), func(context.Context) error { calls++; return nil })
		if !errors.Is(err, sqllock.ErrInvalidOption) || calls != 0 {
			t.Errorf("Retry with zero attempts = %v after %d calls, want ErrInvalidOption and no call", err, calls)
		}
		_, err = optimistic.Modify(ctx, db.DB, noVer, 1, optimistic.LimitAttempts(optimistic.NoRetry(), 0), func(it *item) error { it.Qty = 0; return nil })
		if !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("Modify with zero attempts = %v", err)
		}
		if qty, ver := readStock(t, db, name); qty != 10 || ver != 1 {
			t.Fatalf("bad input changed the row: qty %d version %d", qty, ver)
		}
		// Counters and Lockers check their input too.
		for _, n := range []int{0, -1, optimistic.MaxStripes + 1} {
			if _, err := optimistic.NewCounter(db.DB, db.Dialect, "c", n); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("NewCounter(%d stripes) = %v", n, err)
			}
		}
		if _, err := optimistic.New(db.DB, db.Dialect, optimistic.WithTable("x y")); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("New(WithTable(\"x y\")) = %v", err)
		}
	})
}

func TestModify(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 3)
		tb := newTable(t, db, name)
		got, err := optimistic.Modify(ctx, db.DB, tb, 1, nil, func(it *item) error {
			it.Qty--
			it.Label = "sold one"
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Qty != 2 || got.Version != 2 || got.Label != "sold one" {
			t.Fatalf("Modify returned %+v", got)
		}
		if qty, ver := readStock(t, db, name); qty != 2 || ver != 2 {
			t.Fatalf("row = qty %d version %d", qty, ver)
		}
		// Missing row.
		if _, err := optimistic.Modify(ctx, db.DB, tb, 99, nil, func(*item) error { return nil }); !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("Modify of a missing row = %v, want sql.ErrNoRows", err)
		}
	})
}

// TestBusinessAbort: a function that says "sold out" stops the retry loop at
// once with its own error, even while conflicts are happening.
func TestBusinessAbort(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 0)
		tb := newTable(t, db, name)
		errSoldOut := errors.New("sold out")
		calls := 0
		_, err := optimistic.Modify(ctx, db.DB, tb, 1, optimistic.LimitAttempts(optimistic.ExponentialBackoff(time.Second, time.Second), 100), func(it *item) error {
			calls++
			if it.Qty == 0 {
				return errSoldOut
			}
			it.Qty--
			return nil
		})
		if err != errSoldOut || calls != 1 {
			t.Fatalf("Modify = %v after %d calls, want the caller's error after 1", err, calls)
		}
		// Stop ends Retry even for an error that is a conflict.
		calls = 0
		conflict := fmt.Errorf("mine: %w", sqllock.ErrConflict)
		err = optimistic.Retry(ctx, optimistic.LimitAttempts(optimistic.ExponentialBackoff(time.Second, time.Second), 100), func(context.Context) error {
			calls++
			return optimistic.Stop(conflict)
		})
		if err != conflict || calls != 1 {
			t.Fatalf("Retry(Stop(conflict)) = %v after %d calls", err, calls)
		}
		if qty, ver := readStock(t, db, name); qty != 0 || ver != 1 {
			t.Fatalf("row changed: qty %d version %d", qty, ver)
		}
	})
}

func TestRetry(t *testing.T) {
	ctx := ctxT(t)
	// Conflicts are retried until the limit, and the result still matches
	// ErrConflict and says how often it tried.
	calls := 0
	err := optimistic.Retry(ctx, optimistic.LimitAttempts(optimistic.ExponentialBackoff(time.Microsecond, time.Millisecond), 5), func(context.Context) error {
		calls++
		return sqllock.ErrConflict
	})
	if !errors.Is(err, sqllock.ErrConflict) || calls != 5 || !strings.Contains(err.Error(), "5 attempts") {
		t.Fatalf("Retry = %v after %d calls, want ErrConflict after 5", err, calls)
	}
	// Success on the third attempt.
	calls = 0
	if err := optimistic.Retry(ctx, nil, func(context.Context) error {
		if calls++; calls < 3 {
			return sqllock.ErrConflict
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("Retry = %v after %d calls", err, calls)
	}
	// Other errors are not retried.
	calls = 0
	boom := errors.New("boom")
	if err := optimistic.Retry(ctx, nil, func(context.Context) error { calls++; return boom }); err != boom || calls != 1 {
		t.Fatalf("Retry = %v after %d calls", err, calls)
	}
	// The context bounds the loop, pauses included.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err = optimistic.Retry(cctx, optimistic.ExponentialBackoff(time.Hour, time.Hour), func(context.Context) error { return sqllock.ErrConflict })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, sqllock.ErrConflict) {
		t.Fatalf("Retry past the deadline = %v, want the conflict joined with DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 30*time.Second {
		t.Fatalf("Retry slept %v past its deadline", d)
	}
	// A policy that retries at once: the context's end still comes with the
	// last conflict, as with any other policy.
	cctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	calls = 0
	err = optimistic.Retry(cctx, optimistic.PolicyFunc(func(int) (time.Duration, bool) { return 0, true }), func(context.Context) error {
		calls++
		return fmt.Errorf("row 7: %w", sqllock.ErrConflict)
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, sqllock.ErrConflict) || !strings.Contains(err.Error(), "row 7") {
		t.Fatalf("Retry with no pause past the deadline = %v after %d calls, want the last conflict joined with DeadlineExceeded", err, calls)
	}
	// A context that ended before the first attempt has no conflict to join.
	if err := optimistic.Retry(cctx, nil, func(context.Context) error { return nil }); err != context.DeadlineExceeded {
		t.Fatalf("Retry on an ended context = %v, want its error alone", err)
	}
	// Backoff grows, stays under its cap and is jittered.
	p := optimistic.ExponentialBackoff(time.Millisecond, 8*time.Millisecond)
	seen := map[time.Duration]bool{}
	for attempt := 1; attempt <= 10; attempt++ {
		for range 20 {
			d, ok := p.Backoff(attempt)
			hi := min(time.Millisecond<<(attempt-1), 8*time.Millisecond)
			if !ok || d < hi/2 || d > hi {
				t.Fatalf("Backoff(%d) = %v, %v; want within [%v, %v]", attempt, d, ok, hi/2, hi)
			}
			seen[d] = true
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d distinct pauses: no jitter", len(seen))
	}
	if err := optimistic.Retry(ctx, optimistic.ExponentialBackoff(0, time.Second), func(context.Context) error { return nil }); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("Retry with a zero minimum backoff = %v", err)
	}
}

// TestConcurrentModify: many goroutines incrementing one row through the
// CAS never lose an update.
func TestConcurrentModify(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		name := stockTable(t, db, 0)
		tb := newTable(t, db, name)
		const workers, each = 8, 25
		var conflicts atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					tries := 0
					_, st, err := optimistic.ModifyStats(ctx, db.DB, tb, 1, optimistic.LimitAttempts(optimistic.ExponentialBackoff(100*time.Microsecond, 20*time.Millisecond), 1000), func(it *item) error {
						tries++
						v := it.Qty
						time.Sleep(time.Duration(rand.N(200)) * time.Microsecond) // widen the race
						it.Qty = v + 1
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					if st.Attempts != tries || st.Conflicts != tries-1 || st.Transient != 0 {
						t.Errorf("fn ran %d times, stats %+v", tries, st)
					}
					conflicts.Add(int64(tries - 1))
				}
			})
		}
		wg.Wait()
		qty, ver := readStock(t, db, name)
		if qty != workers*each || ver != workers*each+1 {
			t.Fatalf("qty %d version %d, want %d and %d", qty, ver, workers*each, workers*each+1)
		}
		t.Logf("%d increments, %d conflicts retried", workers*each, conflicts.Load())
	})
}

func TestLockerStaleLease(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		l, err := optimistic.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		key := locktest.Key(t)
		a, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// Never refused: a second stamp makes the first stale.
		b, err := l.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("TryAcquire of a stamped key = %v; the optimistic strategy never refuses", err)
		}
		if b.Token() <= a.Token() {
			t.Fatalf("second token %d not above first %d", b.Token(), a.Token())
		}
		// The fence check against the table: the stored version is b's.
		var v int64
		if err := db.QueryRowContext(ctx, rebind(db.Dialect, "SELECT version FROM sqllock_versions WHERE lock_key = ?"), key).Scan(&v); err != nil || v != b.Token() {
			t.Fatalf("stored version %d, %v; want %d", v, err, b.Token())
		}
		if err := a.(*optimistic.Lease).Check(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Check of the stale lease = %v, want ErrLockLost", err)
		}
		select {
		case <-a.Done():
		default:
			t.Fatal("Done() open after Check found the lease stale")
		}
		if err := a.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) || !strings.Contains(err.Error(), key) {
			t.Fatalf("first Release of the stale lease = %v, want ErrLockLost naming the key", err)
		}
		if err := a.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Fatalf("second Release = %v, want ErrReleased", err)
		}
		if err := b.(*optimistic.Lease).Check(ctx); err != nil {
			t.Fatalf("Check of the current lease = %v", err)
		}
		// Release of the current lease inside a transaction that rolls back
		// changes nothing in the table.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.(*optimistic.Lease).ReleaseTx(ctx, tx); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if err := db.QueryRowContext(ctx, rebind(db.Dialect, "SELECT version FROM sqllock_versions WHERE lock_key = ?"), key).Scan(&v); err != nil || v != b.Token() {
			t.Fatalf("after a rolled-back ReleaseTx the version is %d, %v; want %d", v, err, b.Token())
		}
		// A stale lease's ReleaseTx fails inside the caller's transaction.
		c, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(ctx, key); err != nil {
			t.Fatal(err)
		}
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := c.(*optimistic.Lease).ReleaseTx(ctx, tx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("ReleaseTx of a stale lease = %v, want ErrLockLost", err)
		}
	})
}

// TestDoSeesStaleness: sqllock.Do with an optimistic Locker returns
// ErrLockLost when another stamp overlapped fn.
func TestDoSeesStaleness(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		l, err := optimistic.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		key := locktest.Key(t)
		err = sqllock.Do(ctx, l, key, func(ctx context.Context) error {
			other, err := l.Acquire(ctx, key)
			if err != nil {
				return err
			}
			return other.Release(ctx)
		})
		if !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Do overlapped by another stamp = %v, want ErrLockLost", err)
		}
		if err := sqllock.Do(ctx, l, key, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Do without overlap = %v", err)
		}
	})
}

// TestCounterUneven: stripes that run dry unevenly never cause a false
// "sold out", and the last unit is found wherever it is.
func TestCounterUneven(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		table := counterTable(t, db)
		a, err := optimistic.NewCounter(db.DB, db.Dialect, table, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		// 5 units over 16 stripes: 11 stripes are empty from the start.
		if err := a.Set(ctx, "item", 5); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if err := a.Take(ctx, "item"); err != nil {
				t.Fatalf("take %d of 5: %v", i+1, err)
			}
		}
		err = a.Take(ctx, "item")
		if !errors.Is(err, optimistic.ErrSoldOut) || !strings.Contains(err.Error(), "item") {
			t.Fatalf("take after the last unit = %v, want ErrSoldOut naming the item", err)
		}
		// One unit appears in one stripe behind a's back (another process
		// restocking): a has seen every stripe empty, yet must find it.
		for s := range 16 {
			exec(t, db, "UPDATE "+table+" SET qty = 1 WHERE item = ? AND stripe = ?", "item", s)
			if err := a.Take(ctx, "item"); err != nil {
				t.Fatalf("unit in stripe %d not found: %v", s, err)
			}
			if err := a.Take(ctx, "item"); !errors.Is(err, optimistic.ErrSoldOut) {
				t.Fatalf("after taking the unit of stripe %d: %v, want ErrSoldOut", s, err)
			}
		}
		// Many takers, stripes drained unevenly by a direct write: exactly
		// the stock is sold.
		if err := a.Set(ctx, "item", 1000); err != nil {
			t.Fatal(err)
		}
		exec(t, db, "UPDATE "+table+" SET qty = 0 WHERE item = ? AND stripe < 12", "item")
		want, err := a.Total(ctx, "item")
		if err != nil {
			t.Fatal(err)
		}
		var sold atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for {
					err := a.Take(ctx, "item")
					if errors.Is(err, optimistic.ErrSoldOut) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					sold.Add(1)
				}
			})
		}
		wg.Wait()
		if left, _ := a.Total(ctx, "item"); sold.Load() != want || left != 0 {
			t.Fatalf("sold %d of %d, %d left", sold.Load(), want, left)
		}
		if err := a.Take(ctx, "bad\xff"); !errors.Is(err, sqllock.ErrInvalidKey) {
			t.Errorf("Take of an invalid item = %v", err)
		}
		if err := a.Set(ctx, "item", -1); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("Set of negative stock = %v", err)
		}
	})
}

// TestCounterStripeMismatch: a Counter configured with fewer stripes than
// the table holds for an item cannot reach the others. Once its own are
// empty, Take reports the mismatch and what to do, where it used to spin
// forever (Total counted units that Take never tried).
func TestCounterStripeMismatch(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		table := counterTable(t, db)
		wide, err := optimistic.NewCounter(db.DB, db.Dialect, table, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer wide.Close()
		if err := wide.Set(ctx, "item", 16); err != nil { // 2 a stripe
			t.Fatal(err)
		}
		narrow, err := optimistic.NewCounter(db.DB, db.Dialect, table, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer narrow.Close()
		for i := range 4 { // stripes 0 and 1
			if err := narrow.Take(ctx, "item"); err != nil {
				t.Fatalf("take %d of the 4 units in the narrow counter's stripes: %v", i+1, err)
			}
		}
		err = narrow.Take(ctx, "item")
		if !errors.Is(err, sqllock.ErrInvalidOption) || errors.Is(err, optimistic.ErrSoldOut) ||
			!strings.Contains(err.Error(), "8 stripes") || !strings.Contains(err.Error(), "NewCounter") {
			t.Fatalf("take beyond the narrow counter's stripes = %v; want ErrInvalidOption naming the 8 stripes and NewCounter", err)
		}
		if n, err := wide.Total(ctx, "item"); err != nil || n != 12 {
			t.Fatalf("total %d, %v; want the 12 units the narrow counter could not reach", n, err)
		}
		// Set through the narrow counter spreads the item over its own
		// stripes: it works again, up to sold out.
		if err := narrow.Set(ctx, "item", 3); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := narrow.Take(ctx, "item"); err != nil {
				t.Fatal(err)
			}
		}
		if err := narrow.Take(ctx, "item"); !errors.Is(err, optimistic.ErrSoldOut) {
			t.Fatalf("take after the narrow Set's 3 units = %v, want ErrSoldOut", err)
		}
	})
}

// TestCancelledAcquire: an Acquire whose context has ended fails with both
// ErrNotAcquired and the context's error, and leaves no connection in use.
func TestCancelledAcquire(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		fresh := testdb.Fresh(t, db.Dialect, 4)
		l, err := optimistic.New(fresh.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		lease, err := l.Acquire(ctx, locktest.Key(t))
		if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with a cancelled context = %v, %v", lease, err)
		}
		if n := fresh.Stats().InUse; n != 0 {
			t.Fatalf("%d connections in use after a cancelled Acquire", n)
		}
	})
}
