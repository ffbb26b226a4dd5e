package tablelock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// appWriter plays a holder's own application on SQLite: write
// transactions of hold each (BEGIN IMMEDIATE: the write lock from the
// start), gap apart, until ctx ends. It returns when the last has ended.
func appWriter(t *testing.T, ctx context.Context, db *testdb.DB, hold, gap func() time.Duration) (wait func()) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS sqlitebusy_app (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			d := hold()
			if err := appWrite(db, func() { time.Sleep(d) }); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(gap())
		}
	}()
	return wg.Wait
}

func between(lo, hi time.Duration) func() time.Duration {
	return func() time.Duration { return lo + rand.N(hi-lo) }
}

// A lone holder on SQLite whose own application writes in transactions of
// 400–600 ms, 10–50 ms apart, keeps its 2 s lease: its renewals get the
// write lock in the gaps, though each has to wait out a transaction.
func TestSQLiteRenewalWinsBetweenAppTransactions(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	app := testdb.Fresh(t, sqllock.SQLite, 0)
	const ttl = 2 * time.Second
	l := newLocker(t, db, tablelock.WithTTL(ttl))
	ctx := context.Background()
	lease, err := l.Acquire(ctx, locktest.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	appCtx, stop := context.WithTimeout(ctx, 3*ttl)
	defer stop()
	wait := appWriter(t, appCtx, app, between(400*time.Millisecond, 600*time.Millisecond), between(10*time.Millisecond, 50*time.Millisecond))
	select {
	case <-lease.Done():
	case <-appCtx.Done():
	}
	stop()
	wait()
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease was lost to the application's own write transactions: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// appWrite runs one write transaction of the application on db, with
// SQLite's write lock held while wait runs.
func appWrite(db *testdb.DB, wait func()) error {
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("app transaction: %v", err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO sqlitebusy_app (n) VALUES (1)`); err != nil {
		return fmt.Errorf("app write: %v", err)
	}
	wait()
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("app commit: %v", err)
	}
	return nil
}

// holdWrite keeps SQLite's write lock on db from start to end after t0.
func holdWrite(t *testing.T, db *testdb.DB, t0 time.Time, start, end time.Duration) {
	t.Helper()
	time.Sleep(time.Until(t0.Add(start)))
	if err := appWrite(db, func() { time.Sleep(time.Until(t0.Add(end))) }); err != nil {
		t.Fatal(err)
	}
}

// A renewal that waited out one write transaction counts its deadline from
// the statement that renewed, not from its first look: with a 2 s TTL
// (renewals every 667 ms, deadline 1.8 s), one that waits 0.63 s and the
// next that waits 0.8 s keep the lease, as transactions under 1.13 s must.
// Counted from the first look, the second renewal had 1.13 s - 0.63 s
// left and the lease was lost.
func TestSQLiteRenewalDeadlineFromTheStatementThatRenewed(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	app := testdb.Fresh(t, sqllock.SQLite, 0)
	if _, err := app.Exec(`CREATE TABLE IF NOT EXISTS sqlitebusy_app (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	l := newLocker(t, db, tablelock.WithTTL(ttl))
	ctx := context.Background()
	lease, err := l.Acquire(ctx, locktest.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	// The first renewal (at 0.67 s) waits until 1.3 s; the second (at
	// about 1.97 s) until 2.75 s.
	holdWrite(t, app, t0, 450*time.Millisecond, 1300*time.Millisecond)
	holdWrite(t, app, t0, 1850*time.Millisecond, 2750*time.Millisecond)
	select {
	case <-lease.Done():
	case <-time.After(time.Until(t0.Add(3500 * time.Millisecond))):
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease was lost to two transactions the TTL allows: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// A renewal kept from SQLite's write lock past the safety margin by one
// long transaction ends the lease with a loss that says the database was
// busy, for how long, and which key.
func TestSQLiteBusyRenewalSaysSo(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	app := testdb.Fresh(t, sqllock.SQLite, 0)
	const ttl = time.Second
	l := newLocker(t, db, tablelock.WithTTL(ttl))
	ctx := context.Background()
	key := locktest.Key(t)
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	appCtx, stop := context.WithCancel(ctx)
	defer stop()
	// One transaction longer than the TTL, then none.
	wait := appWriter(t, appCtx, app, func() time.Duration { stop(); return 2 * ttl }, func() time.Duration { return 0 })
	select {
	case <-lease.Done():
	case <-time.After(3 * ttl):
		t.Fatal("the lease outlived a write lock held past its TTL")
	}
	wait()
	err = lease.Err()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	t.Logf("the loss: %v", err)
	for _, want := range []string{"database busy", "SQLite's write lock", "ms", key} {
		if !strings.Contains(msg, want) {
			t.Errorf("loss %q does not say %q", msg, want)
		}
	}
	lease.Release(ctx)
}

// On SQLite a take bumps the fence row in its own statement, through the
// lock table's triggers (migration 00018, or CreateTable): the next take,
// of any key in any lock table, draws a larger token.
func TestSQLiteTakeBumpsFenceRow(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	ctx := context.Background()
	table := fmt.Sprintf("tl_fence_%x", rand.Uint64())
	if err := tablelock.CreateTable(ctx, db.DB, db.Dialect, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	var triggers int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN (?, ?)`, table, tablelock.DefaultTable).Scan(&triggers); err != nil || triggers != 4 {
		t.Fatalf("triggers on %s and %s: %d, %v; want 4", table, tablelock.DefaultTable, triggers, err)
	}
	lockers := []*tablelock.Locker{newLocker(t, db, tablelock.WithTable(table)), newLocker(t, db), newLocker(t, db, tablelock.WithTable(table))}
	key := locktest.Key(t)
	var last int64
	for i, l := range lockers {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var fence int64
		if err := db.QueryRow(`SELECT value FROM sqllock_fence WHERE id = 1`).Scan(&fence); err != nil {
			t.Fatal(err)
		}
		if lease.Token() <= last || fence != lease.Token() {
			t.Errorf("take %d: token %d after %d, fence row at %d; want a larger token, and the fence row at it", i, lease.Token(), last, fence)
		}
		last = lease.Token()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
