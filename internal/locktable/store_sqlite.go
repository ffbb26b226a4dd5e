package locktable

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
)

func init() { register(sqllock.SQLite, newSQLite) }

// sqliteStore serves SQLite: no sequence, so a take bumps the fence row in
// the transaction that takes the key; one writer at a time, so pollers
// read before they write.
type sqliteStore struct {
	statements
	q struct {
		take, peek, fence, renew, release, releaseOwner, forceRelease, audit, reap string
		triggers                                                                   string
	}
	// bumps: the table's triggers bump the fence row with every new token
	// (migration 00018, or CreateTable), so a take is one statement and
	// needs no transaction of its own: 1 yes, 2 no, 0 not known yet.
	bumps atomic.Int32
	lane  sqliteLane
}

// close drops the lane.
func (s *sqliteStore) close() { s.lane.close() }

// newSQLite reads its statements from sql/sqlite. They name the table and
// its triggers; the triggers are named after the table's expires_at index
// (sqliteTriggerNames), and quoted where they are names, bare where
// strings.
func newSQLite(n names, _ Config) store {
	in, up := sqliteTriggerNames(n.index)
	f := statementFiles{dir: "sqlite", names: strings.NewReplacer(
		backquotedTable, n.table,
		"`sqllock_locks_token_in`", in, "`sqllock_locks_token_up`", up,
		"'sqllock_locks_token_in'", "'"+strings.Trim(in, "`")+"'",
		"'sqllock_locks_token_up'", "'"+strings.Trim(up, "`")+"'",
	)}
	s := &sqliteStore{}
	f.read(map[string]*string{
		"take": &s.q.take, "peek": &s.q.peek, "fence": &s.q.fence, "renew": &s.q.renew,
		"release": &s.q.release, "release_owner": &s.q.releaseOwner, "force_release": &s.q.forceRelease,
		"audit": &s.q.audit, "reap": &s.q.reap, "triggers": &s.q.triggers,
		"holder": &s.holder, "live": &s.live, "list": &s.list, "ddl": &s.ddl,
	})
	s.param = func(i int) string { return "?" + strconv.Itoa(i) }
	if !strings.Contains(n.table, ".") {
		// A table in another schema (an attached database) has no
		// triggers: its takes bump the fence row themselves.
		s.ddl += "\n" + f.text("ddl_triggers")
	}
	return s
}

// sqliteTriggerNames names a table's triggers after the name of its
// expires_at index (quoted, unique per schema like it, though SQLite's
// tables no longer have the index): <table>_token_in and _token_up.
func sqliteTriggerNames(index string) (in, up string) {
	base := strings.TrimSuffix(index, "_expires_at`")
	return base + "_token_in`", base + "_token_up`"
}

// interrupts reports whether db's driver is modernc.org/sqlite, which
// interrupts a statement whose context ends, and ends its busy handler's
// wait for the write lock then too; others (mattn/go-sqlite3) sleep out
// the busy timeout first, so their takes stay detached.
func (s *sqliteStore) interrupts(db *sql.DB) bool {
	t := reflect.TypeOf(db.Driver())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == "modernc.org/sqlite"
}

// schema is the schema of table as configured: its gates are beside that
// schema's file.
func (s *sqliteStore) schema(table string) string {
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i]
	}
	return "main"
}

// take takes the key with the bump of the fence row: in one statement
// where the table's triggers bump it, in one transaction with an update
// of its own where they do not. Its statements are prepared once (per
// connection, by database/sql): parsing them on every call cost more than
// running them.
func (s *sqliteStore) take(ctx context.Context, h handle, c Claim) (a Attempt, err error) {
	if s.bumps.Load() == 0 {
		var n int
		if err := h.queryRow(ctx, s.q.triggers, nil, &n); err != nil {
			return a, err
		}
		if n == 2 {
			s.bumps.Store(1)
		} else {
			s.bumps.Store(2)
		}
	}
	sts, put, err := h.stmts.StmtAll(ctx, h.DB, s.q.peek, s.q.take, s.q.fence)
	if err != nil {
		return a, err
	}
	defer put()
	peekSt, takeSt, fenceSt := sts[0], sts[1], sts[2]
	var holder string
	var left int64
	if !c.ExpectFree {
		// A read first: in WAL mode it takes no lock, so waiters polling a
		// held key do not queue for the single write lock ahead of the
		// holder's renewals and release.
		err = peekSt.QueryRowContext(ctx, c.Key).Scan(&holder, &a.Token, &a.Holds, &a.Host, &left)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return a, err
		case left > 0 && holder != c.Owner:
			a.Remaining = remaining(left)
			return a, nil
		}
	}
	if s.bumps.Load() == 1 {
		// One statement, a write: SQLite takes the write lock before it
		// runs, so the fence read inside it and the triggers' bump cannot
		// interleave with another writer. A transaction of its own cost
		// three more calls and half again the time of a take. It runs on
		// the lane, where no goroutine watches its context, if it can.
		args := []any{c.Key, c.Owner, c.Host, micros(c.TTL)}
		err = s.lane.queryRow(ctx, h.DB, s.q.take, args, &a.Token, &a.Holds)
		if errors.Is(err, errNoLane) {
			err = takeSt.QueryRowContext(ctx, args...).Scan(&a.Token, &a.Holds)
		}
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// Held by another: who, and for how long, read after.
			err = peekSt.QueryRowContext(ctx, c.Key).Scan(&holder, &a.Token, &a.Holds, &a.Host, &left)
			if errors.Is(err, sql.ErrNoRows) {
				return Attempt{Remaining: 0}, nil // gone since: look again
			}
			a.Remaining = remaining(left)
			return a, err
		case err != nil:
			return a, err
		}
		a.Won = true
		return a, nil
	}
	tx, err := h.BeginTx(ctx, nil)
	if err != nil {
		return a, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// The upsert is the transaction's first statement, a write: SQLite
	// takes the write lock there, so the fence read inside it and the bump
	// below cannot interleave with another writer.
	err = tx.StmtContext(ctx, takeSt).QueryRowContext(ctx, c.Key, c.Owner, c.Host, micros(c.TTL)).Scan(&a.Token, &a.Holds)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if err = tx.StmtContext(ctx, peekSt).QueryRowContext(ctx, c.Key).Scan(&holder, &a.Token, &a.Holds, &a.Host, &left); err != nil {
			return a, err
		}
		a.Remaining = remaining(left)
	case err != nil:
		return a, err
	default:
		a.Won = true
		if _, err = tx.StmtContext(ctx, fenceSt).ExecContext(ctx, a.Token); err != nil {
			return a, err
		}
	}
	return a, tx.Commit()
}

// renewPoll is how often a renewal looks again for SQLite's write lock
// while another connection holds it. An application's transactions come
// a few milliseconds apart; SQLite's own busy handler sleeps up to 100 ms
// between looks and mostly missed those gaps, so a holder whose own
// application kept writing lost its lease.
const renewPoll = time.Millisecond

// renew runs the renewal on a connection of its own with SQLite's busy
// handler off, and looks for the write lock itself every renewPoll, for
// as long as ctx and the connection's busy timeout allow: a renewal, once
// due, takes the write lock in the first gap between other transactions,
// ahead of writers that sleep in the busy handler. A renewal that never
// found the lock free says how long it waited.
func (s *sqliteStore) renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, time.Time, error) {
	conn, err := h.Conn(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer conn.Close()
	var busyMS int64
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busyMS); err != nil {
		return 0, time.Time{}, err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		return 0, time.Time{}, err
	}
	defer func() {
		// The connection goes back to the pool with the timeout it came
		// with, or not at all.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, err := conn.ExecContext(rctx, `PRAGMA busy_timeout = `+strconv.FormatInt(busyMS, 10)); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	var busySince time.Time
	var tick *time.Timer
	for {
		// The row's new expiry is counted from this statement, not from
		// the first look: a renewal that waited out a transaction leaves
		// the next one the whole interval.
		sent := time.Now()
		res, err := conn.ExecContext(ctx, s.q.renew, key, owner, token, micros(ttl))
		if err == nil {
			n, err := res.RowsAffected()
			return n, sent, err
		}
		switch {
		case !busySince.IsZero() && ctx.Err() != nil:
			// Ended while it looked again: still the busy database.
			return 0, time.Time{}, busyError(time.Since(busySince), ctx.Err())
		case !dberr.IsBusy(err):
			return 0, time.Time{}, err
		}
		now := time.Now()
		if busySince.IsZero() {
			busySince = now
			tick = time.NewTimer(renewPoll)
			defer tick.Stop()
		} else {
			tick.Reset(renewPoll)
		}
		if now.Sub(busySince) >= time.Duration(busyMS)*time.Millisecond {
			return 0, time.Time{}, busyError(now.Sub(busySince), err)
		}
		select {
		case <-ctx.Done():
			return 0, time.Time{}, busyError(time.Since(busySince), ctx.Err())
		case <-tick.C:
		}
	}
}

// busySlack is how far past its deadline an uncancelled statement may
// wait for the write lock: a release bounded to 5 s runs a few µs after
// its timeout began, and a busy timeout of 5 s still fits.
const busySlack = 50 * time.Millisecond

// busyError is a renewal that found SQLite's write lock taken for d;
// it wraps cause (SQLITE_BUSY, or the context's end).
func busyError(d time.Duration, cause error) error {
	return fmt.Errorf("database busy: another transaction held SQLite's write lock for %d ms: %w", d.Milliseconds(), cause)
}

func (s *sqliteStore) release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	n, err := s.lane.exec(ctx, h.DB, s.q.release, key, owner, token, micros(keep))
	if !errors.Is(err, errNoLane) {
		return n, err
	}
	return h.exec(s.uncancelled(ctx, h), s.q.release, key, owner, token, micros(keep))
}

// uncancelled is ctx without its cancellation where a statement on h ends
// within ctx's deadline anyway: SQLite has no network to hang on, its one
// wait, for the write lock, ends within the busy timeout (as the lane read
// it: the DSN sets it for every connection of the pool), and a pool
// without a connection limit never queues. database/sql and the driver
// start a goroutine to interrupt each statement whose context can end; a
// release, always bounded by its own timeout, spent a tenth of an
// acquire and release on those. For a release that found the lane in use,
// and only for contexts no caller cancels: a release's
// (lease.ReleaseTimeout, detached from the caller).
func (s *sqliteStore) uncancelled(ctx context.Context, h handle) context.Context {
	dl, ok := ctx.Deadline()
	if !ok || h.DB.Stats().MaxOpenConnections != 0 {
		return ctx
	}
	if busy, ok := s.lane.busy(); !ok || busy > time.Until(dl)+busySlack {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

func (s *sqliteStore) releaseOwner(ctx context.Context, h handle, key, owner string) (int64, error) {
	return h.exec(ctx, s.q.releaseOwner, key, owner)
}

func (s *sqliteStore) forceRelease(ctx context.Context, h handle, key string, token int64) (int64, error) {
	return h.exec(ctx, s.q.forceRelease, key, token)
}

func (s *sqliteStore) forceReleaseTx(ctx context.Context, tx *sql.Tx, key string, token int64) (int64, error) {
	return execTx(ctx, tx, s.q.forceRelease, key, token)
}

func (s *sqliteStore) audit(ctx context.Context, tx *sql.Tx, key string, token int64, table string, a Audit) (int64, error) {
	return execTx(ctx, tx, s.q.audit, key, token, table, a.Operator, a.Reason)
}

func (s *sqliteStore) reap(ctx context.Context, db *sql.DB, grace time.Duration, batch int) (int64, error) {
	return execReap(ctx, db, s.q.reap, grace, batch)
}
