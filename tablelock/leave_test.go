package tablelock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// leftWithin is how long a waiter that gave up may take to take its
// Locker's entry out of the row: it runs in the background, one statement.
const leftWithin = time.Second

// waitEmptyQueue fails t unless key's row queues no entry within d; what
// says whose entries those would be.
func waitEmptyQueue(t *testing.T, db *testdb.DB, table, key string, d time.Duration, what string) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if err := db.QueryRow("SELECT cardinality(waiters) FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1", key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatalf("%s: %d entries still queued in the row %v later", what, n, d)
}

// TestGaveUpLeavesNoEntry: in the default order, Lockers whose Acquires
// on a held key are cancelled take their entries out of the row, so no
// release calls them and no operator sees them as waiters.
func TestGaveUpLeavesNoEntry(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := locktest.Key(t)
	held, err := newLocker(t, db, opts...).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	const n = 5
	quit := make(chan error, n)
	var cancels []context.CancelFunc
	for i := range n {
		qctx, qcancel := context.WithCancel(ctx)
		cancels = append(cancels, qcancel)
		l := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
		go func() {
			_, err := l.Acquire(qctx, key)
			quit <- err
		}()
		waitQueued(t, db, table, key, i+1)
	}
	for _, c := range cancels {
		c()
	}
	for range n {
		if err := <-quit; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled Acquire = %v", err)
		}
	}
	waitEmptyQueue(t, db, table, key, leftWithin, "Lockers whose Acquires were cancelled")
}

// TestGaveUpOtherStillWaits: a Locker with two Acquires waiting on a key
// keeps its entry while one of them still waits after the other was
// cancelled, and the one still waiting gets the key when it is released.
func TestGaveUpOtherStillWaits(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := locktest.Key(t)
	held, err := newLocker(t, db, opts...).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	qctx, qcancel := context.WithCancel(ctx)
	quit := make(chan error, 1)
	go func() {
		_, err := l.Acquire(qctx, key)
		quit <- err
	}()
	waitQueued(t, db, table, key, 1)
	got := acquireAndRelease(ctx, l, key) // the same Locker: its entry is the one queued
	time.Sleep(100 * time.Millisecond)    // in its queue in this process
	qcancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled Acquire = %v", err)
	}
	time.Sleep(leftWithin) // a leave, had one run
	if q, err := queuedIn(db, table, key); err != nil || len(q) != 1 {
		t.Fatalf("queued after one of two Acquires of a Locker gave up: %q, %v; want its one entry", q, err)
	}
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, got, released, within, "the Acquire still waiting")
}

// TestGaveUpMidTake (F1's race in the default order): a waiter that gives
// up while its take waits for the row lock leaves no entry once the take
// commits its refusal, which queues the entry after the caller has gone.
// The test holds the row with SELECT ... FOR UPDATE while the waiter's
// context ends.
func TestGaveUpMidTake(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := locktest.Key(t)
	held, err := newLocker(t, db, opts...).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var pid int
	if err := tx.QueryRow("SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1 FOR UPDATE", key); err != nil {
		t.Fatal(err)
	}
	quitter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	qctx, qcancel := context.WithCancel(ctx)
	quit := make(chan error, 1)
	go func() {
		_, err := quitter.Acquire(qctx, key)
		quit <- err
	}()
	waitLockWait(t, db, pid)
	qcancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Fatalf("the quitter's Acquire = %v, want it cancelled", err)
	}
	time.Sleep(200 * time.Millisecond) // a leave beside the take would run now
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitEmptyQueue(t, db, table, key, leftWithin, "a waiter that gave up while its take waited for the row lock")
}

// TestCloseLeavesNoEntry: a Locker closed while its Acquires wait takes
// its entries out of every key's row.
func TestCloseLeavesNoEntry(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	keys := []string{locktest.Key(t), locktest.Key(t)}
	l := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	quit := make(chan error, len(keys))
	for _, key := range keys {
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		go func() {
			_, err := l.Acquire(ctx, key)
			quit <- err
		}()
		waitQueued(t, db, table, key, 1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for range keys {
		if err := <-quit; !errors.Is(err, sqllock.ErrClosed) {
			t.Fatalf("an Acquire on a closed Locker = %v", err)
		}
	}
	for _, key := range keys {
		waitEmptyQueue(t, db, table, key, leftWithin, "a closed Locker")
	}
}

// queueOf returns key's queue as text, for restoreQueue.
func queueOf(t *testing.T, db *testdb.DB, table, key string) string {
	t.Helper()
	var q string
	if err := db.QueryRow("SELECT waiters::text FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1", key).Scan(&q); err != nil {
		t.Fatal(err)
	}
	return q
}

// restoreQueue puts back key's queue as queueOf read it, once n entries
// are left in it: the tests of what a release does with a gone Locker
// queued ahead of a live one leave its entry as a crash would, though
// the Locker took it out when its waiter gave up or it closed.
func restoreQueue(t *testing.T, db *testdb.DB, table, key, q string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		left, err := queuedIn(db, table, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries queued, want %d left", len(left), n)
		}
	}
	if _, err := db.Exec("UPDATE "+pgx.Identifier{table}.Sanitize()+" SET waiters = $2::sqllock_waiter[] WHERE lock_key = $1", key, q); err != nil {
		t.Fatal(err)
	}
}
