package locktable_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// A release on SQLite that finds the lane in use runs without its
// context's cancellation (so the driver starts no goroutine to interrupt
// it) only where the statement ends within the context's deadline anyway:
// the busy timeout, as the lane read it, fits in the time left and the
// pool has no connection limit to queue on. Either way a release that
// finds the write lock held ends by its deadline plus one busy timeout,
// with SQLite's busy error or the deadline's.
func TestSQLiteReleaseContext(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLiteFile(t, 300)
	tbl := busyTable(t, db)

	uncancelled := func(d time.Duration) bool {
		c, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return tbl.ReleaseContext(c).Done() == nil
	}
	if uncancelled(5 * time.Second) {
		t.Error("a release runs uncancelled before the busy timeout is known")
	}
	c := locktable.Claim{Key: "k", Owner: "o", Host: "h", TTL: time.Minute}
	a, err := tbl.Take(ctx, c) // opens the lane, which reads the busy timeout
	if err != nil || !a.Won {
		t.Fatalf("take = %+v, %v", a, err)
	}
	if !uncancelled(5 * time.Second) {
		t.Error("a 5 s release over a busy timeout of 300 ms keeps its cancellation")
	}
	if uncancelled(100 * time.Millisecond) {
		t.Error("a 100 ms release over a busy timeout of 300 ms runs uncancelled")
	}
	nodl, cancel := context.WithCancel(ctx)
	defer cancel()
	if tbl.ReleaseContext(nodl).Done() == nil {
		t.Error("a release without a deadline runs uncancelled")
	}
	db.SetMaxOpenConns(8)
	if uncancelled(5 * time.Second) {
		t.Error("a release on a pool with a connection limit runs uncancelled")
	}
	db.SetMaxOpenConns(0)

	// Another connection holds the write lock past the release's timeout.
	free := holdWriteLock(t, db)
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	defer rcancel()
	start := time.Now()
	err = tbl.Release(rctx, c.Key, c.Owner, a.Token, 0)
	el := time.Since(start)
	if !dberr.IsBusy(err) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("release under a held write lock = %v, want SQLite's busy error or the deadline", err)
	}
	if el > time.Second+300*time.Millisecond+200*time.Millisecond {
		t.Errorf("release under a held write lock took %v, past its 1 s timeout and one busy timeout of 300 ms", el)
	}
	free()
	if err := tbl.Release(ctx, c.Key, c.Owner, a.Token, 0); err != nil {
		t.Errorf("release once the write lock is free = %v", err)
	}
}

// busyTable opens db's lock table, closed when the test ends.
func busyTable(t *testing.T, db *sql.DB) *locktable.Table {
	t.Helper()
	tbl, err := locktable.Open(db, sqllock.SQLite, locktable.Config{Table: "sqllock_locks"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	return tbl
}

// holdWriteLock takes SQLite's write lock on a connection of db's until
// the returned function is called.
func holdWriteLock(t *testing.T, db *sql.DB) (free func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	free = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
			conn.Close()
		})
	}
	t.Cleanup(free)
	return free
}

// Takes and releases run on the Table's lane, a connection of its own
// with the busy handler off, and wait for a write lock held elsewhere in
// Go: as long as the pool's busy timeout, ended by the caller's context
// at once, and taking the key as soon as the lock is free. The lane's
// connection never goes back to the pool with its busy timeout at 0.
func TestSQLiteLane(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLiteFile(t, 400)
	tbl := busyTable(t, db)
	c := locktable.Claim{Key: "k", Owner: "o", Host: "h", TTL: time.Minute, ExpectFree: true}
	a, err := tbl.Take(ctx, c)
	if err != nil || !a.Won {
		t.Fatalf("take = %+v, %v", a, err)
	}
	if !tbl.Lane() {
		t.Fatal("a take on a pool without a connection limit opened no lane")
	}
	if err := tbl.Release(ctx, c.Key, c.Owner, a.Token, 0); err != nil {
		t.Fatal(err)
	}

	// Held past the busy timeout: the take gives up as SQLite's busy
	// handler would, with its busy error, not before and not much after.
	free := holdWriteLock(t, db)
	start := time.Now()
	_, err = tbl.Take(ctx, c)
	if el := time.Since(start); !dberr.IsBusy(err) || el < 350*time.Millisecond || el > 900*time.Millisecond {
		t.Errorf("take under a write lock held past the busy timeout of 400 ms = %v after %v, want SQLite's busy error after about 400 ms", err, el)
	}
	// The caller's context ends the wait at once.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	start = time.Now()
	_, err = tbl.Take(cctx, c)
	cancel()
	if el := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || el > 250*time.Millisecond {
		t.Errorf("take given 50 ms under a held write lock = %v after %v, want the deadline within 250 ms", err, el)
	}
	// Freed within the busy timeout: the take wins once it is.
	time.AfterFunc(150*time.Millisecond, free)
	start = time.Now()
	a, err = tbl.Take(ctx, c)
	if el := time.Since(start); err != nil || !a.Won || el < 140*time.Millisecond {
		t.Errorf("take while the write lock is held for 150 ms more = %+v, %v after %v, want won once it was freed", a, err, el)
	}
	free = holdWriteLock(t, db)
	time.AfterFunc(150*time.Millisecond, free)
	if err := tbl.Release(ctx, c.Key, c.Owner, a.Token, 0); err != nil {
		t.Errorf("release while the write lock is held for 150 ms more = %v", err)
	}
	if held, err := tbl.List(ctx); err != nil || len(held) != 0 {
		t.Errorf("rows held after the release = %+v, %v; want none", held, err)
	}

	tbl.Close()
	if tbl.Lane() {
		t.Error("the lane stayed open after Close")
	}
	db.SetMaxIdleConns(8)
	conns := make([]*sql.Conn, 4)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
		var ms int
		if err := conns[i].QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil || ms != 400 {
			t.Errorf("a pooled connection after Close has busy_timeout %d, %v; want the DSN's 400", ms, err)
		}
	}
}

// A pool with a connection limit gets no lane: it would hold one of the
// few connections for good.
func TestSQLiteNoLaneOnLimitedPool(t *testing.T) {
	ctx := context.Background()
	db := testdb.SQLiteFile(t, 400)
	db.SetMaxOpenConns(2)
	tbl := busyTable(t, db)
	c := locktable.Claim{Key: "k", Owner: "o", Host: "h", TTL: time.Minute}
	a, err := tbl.Take(ctx, c)
	if err != nil || !a.Won {
		t.Fatalf("take = %+v, %v", a, err)
	}
	if tbl.Lane() {
		t.Error("a pool of two connections got a lane")
	}
	if err := tbl.Release(ctx, c.Key, c.Owner, a.Token, 0); err != nil {
		t.Fatal(err)
	}
}

// A lane that failed is opened again once laneRetry has passed: a take
// that fails on it (here its table is renamed away for a moment) closes
// it, and the takes after laneRetry get it back, where it used to stay
// closed for the Table's life. Meanwhile statements run on the pool.
func TestSQLiteLaneAfterFailure(t *testing.T) {
	locktable.SetLaneRetry(t, 300*time.Millisecond)
	ctx := context.Background()
	db := testdb.SQLiteFile(t, 400)
	tbl := busyTable(t, db)
	c := locktable.Claim{Key: "k", Owner: "o", Host: "h", TTL: time.Minute, ExpectFree: true} // straight to the take, on the lane
	cycle := func(what string) {
		t.Helper()
		a, err := tbl.Take(ctx, c)
		if err != nil || !a.Won {
			t.Fatalf("take %s = %+v, %v", what, a, err)
		}
		if err := tbl.Release(ctx, c.Key, c.Owner, a.Token, 0); err != nil {
			t.Fatalf("release %s: %v", what, err)
		}
	}
	cycle("first")
	if !tbl.Lane() {
		t.Fatal("no lane after the first take")
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE sqllock_locks RENAME TO sqllock_locks_away"); err != nil {
		t.Fatal(err)
	}
	if a, err := tbl.Take(ctx, c); err == nil {
		t.Fatalf("take with the table renamed away = %+v; want its error", a)
	}
	if tbl.Lane() {
		t.Fatal("the lane stayed open after its statement failed")
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE sqllock_locks_away RENAME TO sqllock_locks"); err != nil {
		t.Fatal(err)
	}
	cycle("with the table back, within laneRetry")
	if tbl.Lane() {
		t.Error("the lane opened again before laneRetry passed")
	}
	time.Sleep(350 * time.Millisecond)
	cycle("after laneRetry")
	if !tbl.Lane() {
		t.Error("no lane after laneRetry passed")
	}
}
