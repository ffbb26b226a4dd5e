package tablelock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// An Acquire on SQLite that gives up while another connection holds the
// write lock returns at once, though its take runs on the caller's
// goroutine (modernc.org/sqlite ends the busy wait with the context), and
// leaves no row behind once the write lock is free.
func TestSQLiteCancelledTakeWhileBusy(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	app := testdb.Fresh(t, sqllock.SQLite, 1)
	l := newLocker(t, db)
	key := locktest.Key(t)
	if _, err := app.Exec(`CREATE TABLE IF NOT EXISTS sqlitegate_app (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	tx, err := app.Begin() // _txlock=immediate: the write lock from here
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO sqlitegate_app (n) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err := l.Acquire(ctx, key)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with the write lock taken = %v, want ErrNotAcquired and DeadlineExceeded", err)
		}
		if took > 150*time.Millisecond {
			t.Errorf("Acquire returned %v after it began, its context ended after 50ms", took.Round(time.Millisecond))
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil { // waits for the give-backs
		t.Fatal(err)
	}
	if n := rowsOf(t, db, key); n != 0 {
		t.Errorf("%d rows of %q held after cancelled takes", n, key)
	}
}

// Takes on SQLite cut off at every point of their statement leave nothing
// held once the Locker has closed: those that took the row as their
// context ended are given back.
func TestSQLiteCancelledTakesLeaveNothing(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	l := newLocker(t, db)
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = locktest.Key(t) + "/" + strconv.Itoa(i)
	}
	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Go(func() {
			for range 40 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.N(300))*time.Microsecond)
				if lease, err := l.Acquire(ctx, key); err == nil {
					lease.Release(context.Background())
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if n := rowsOf(t, db, key); n != 0 {
			t.Errorf("%d rows of %q held after cancelled takes", n, key)
		}
	}
}

// rowsOf counts key's live rows in the default table.
func rowsOf(t *testing.T, db *testdb.DB, key string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqllock_locks WHERE lock_key = ? AND owner <> '' AND expires_at > `+sqliteNow, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
