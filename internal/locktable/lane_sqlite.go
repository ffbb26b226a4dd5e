package locktable

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock/internal/dberr"
)

// sqliteLane is a connection of the SQLite store's own, with SQLite's busy
// handler off, on which takes and releases run without a context that can
// end. A statement whose context can end costs a goroutine in the driver
// (to interrupt it) and, for one that returns rows as a take does,
// another in database/sql: about a tenth of an uncontended acquire and
// release. On the lane no statement waits: SQLite has no network to hang
// on, the connection is the lane's so no pool queues it, and with the
// busy timeout at 0 a write lock held elsewhere fails the statement at
// once (SQLITE_BUSY, and it rolls back). The lane then sleeps and looks
// again as SQLite's busy handler would, for as long as the pool's busy
// timeout allows, but in Go, where the caller's context ends the wait.
// Takes and releases share the one connection: a connection whose pages
// another changed reads them again from the file, which cost more than
// the goroutines saved when each ran on a pooled connection of its own.
//
// The lane is taken only from a pool without a connection limit, where it
// can starve no one; it is discarded, never returned to the pool with its
// busy timeout at 0, when it fails or the store closes. A failed lane is
// opened again a second later (laneRetry): a statement run before the
// schema was migrated, or a context that ended while the lane opened,
// costs it that second, not the Table's life. A statement that finds the
// lane in use, or none, runs on the pool as before.
type sqliteLane struct {
	mu    sync.Mutex           // one statement at a time
	conn  *sql.Conn            // nil until the first statement, after a failure, and once off
	stmts map[string]*sql.Stmt // prepared on conn, by text
	off   bool                 // no lane for good: a pool with a limit, or closed
	retry time.Time            // after a failure, no lane before this
	// busyMS is the pool's busy timeout in ms plus one, read on the
	// lane's connection before its own went to 0; 0 while unknown. Read
	// without mu, by a release that found the lane in use.
	busyMS atomic.Int64
}

// busy is the pool's busy timeout; ok is false while the lane has not
// read it.
func (l *sqliteLane) busy() (d time.Duration, ok bool) {
	ms := l.busyMS.Load()
	return time.Duration(ms-1) * time.Millisecond, ms != 0
}

// errNoLane: the lane is in use, or there is none; the statement runs on
// the pool.
var errNoLane = errors.New("no sqlite lane")

// queryRow runs q on the lane and scans its one row into dest:
// errNoLane where it is to run on the pool instead, sql.ErrNoRows where
// it returned none.
func (l *sqliteLane) queryRow(ctx context.Context, db *sql.DB, q string, args []any, dest ...any) error {
	return l.run(ctx, db, q, func(st *sql.Stmt) error {
		return st.QueryRowContext(context.Background(), args...).Scan(dest...)
	})
}

// exec runs q on the lane and returns the rows it changed, or errNoLane
// where it is to run on the pool instead.
func (l *sqliteLane) exec(ctx context.Context, db *sql.DB, q string, args ...any) (n int64, err error) {
	err = l.run(ctx, db, q, func(st *sql.Stmt) error {
		res, err := st.ExecContext(context.Background(), args...)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	return n, err
}

// run runs fn on q prepared on the lane, looking again while another
// connection holds the write lock, within ctx and the busy timeout.
func (l *sqliteLane) run(ctx context.Context, db *sql.DB, q string, fn func(*sql.Stmt) error) error {
	var waited time.Duration
	var tick *time.Timer
	for n := 0; ; n++ {
		err := l.try(ctx, db, q, fn)
		if !dberr.IsBusy(err) {
			return err
		}
		busy, _ := l.busy() // read before the statement ran
		d := laneDelays[min(n, len(laneDelays)-1)]
		if d = min(d, busy-waited); d <= 0 {
			return err // as the busy handler gives up
		}
		waited += d
		if tick == nil {
			tick = time.NewTimer(d)
			defer tick.Stop()
		} else {
			tick.Reset(d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// laneDelays are the lane's waits between looks at a write lock held
// elsewhere: SQLite's own busy handler's. Looking every millisecond, as a
// renewal does, handed the lock from one writer to the next more often,
// each reading the other's pages again: 8 Lockers on keys of their own
// ran at 0.70 of a bare table's writers, which sleep like this.
var laneDelays = [...]time.Duration{1 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 15 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond,
	25 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// try runs fn once on the lane, opening it first if it is not yet.
func (l *sqliteLane) try(ctx context.Context, db *sql.DB, q string, fn func(*sql.Stmt) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !l.mu.TryLock() {
		return errNoLane
	}
	defer l.mu.Unlock()
	if l.off {
		return errNoLane
	}
	if l.conn == nil {
		if db.Stats().MaxOpenConnections != 0 {
			l.off = true
			return errNoLane
		}
		if time.Now().Before(l.retry) {
			return errNoLane
		}
		if err := l.open(ctx, db); err != nil {
			l.fail()
			return errNoLane
		}
	}
	st := l.stmts[q]
	if st == nil {
		var err error
		if st, err = l.conn.PrepareContext(ctx, q); err != nil {
			l.fail()
			return errNoLane
		}
		l.stmts[q] = st
	}
	err := fn(st)
	switch {
	case err == nil, errors.Is(err, sql.ErrNoRows), dberr.IsBusy(err):
		return err
	default:
		// Rolled back; the pool's try says what is wrong, if anything.
		l.fail()
		return errNoLane
	}
}

// open takes the lane's connection from db and turns its busy handler off.
func (l *sqliteLane) open(ctx context.Context, db *sql.DB) (err error) {
	if l.conn, err = db.Conn(ctx); err != nil {
		return err
	}
	l.stmts = map[string]*sql.Stmt{}
	var ms int64
	if err = l.conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&ms); err != nil {
		return err
	}
	l.busyMS.Store(ms + 1)
	_, err = l.conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`)
	return err
}

// laneRetry is how long a failed lane stays closed: statements run on
// the pool meanwhile.
var laneRetry = time.Second

// fail discards the lane's connection until laneRetry has passed. mu held.
func (l *sqliteLane) fail() {
	l.drop()
	l.retry = time.Now().Add(laneRetry)
}

// drop discards the lane's connection. mu held.
func (l *sqliteLane) drop() {
	for _, st := range l.stmts {
		_ = st.Close()
	}
	l.stmts = nil
	if l.conn != nil {
		// ErrBadConn makes database/sql close it: its busy timeout is 0.
		_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = l.conn.Close()
		l.conn = nil
	}
}

// close waits for a statement on the lane to end, and drops the lane.
func (l *sqliteLane) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop()
	l.off = true
}
