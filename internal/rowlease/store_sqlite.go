package rowlease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

func init() { register(sqllock.SQLite, newSQLite) }

// sqliteNow is SQLite's clock in microseconds since the epoch, the unit of
// the table's timestamps.
const sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

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
}

func newSQLite(n names, _ Config) store {
	t := n.table
	const now = sqliteNow
	s := &sqliteStore{}
	// Runs inside a transaction: SQLite has one writer at a time, so the
	// read of the fence row and its bump cannot interleave with another.
	s.q.take = `INSERT INTO ` + t + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, ?3, 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), ` + now + `, ` + now + ` + ?4)
ON CONFLICT (lock_key) DO UPDATE SET
	token       = CASE WHEN t.expires_at > ` + now + ` THEN t.token ELSE MAX(excluded.token, t.token + 1) END,
	hold_count  = CASE WHEN t.expires_at > ` + now + ` THEN t.hold_count + 1 ELSE 1 END,
	acquired_at = CASE WHEN t.expires_at > ` + now + ` THEN t.acquired_at ELSE excluded.acquired_at END,
	expires_at  = MAX(t.expires_at, excluded.expires_at),
	owner       = excluded.owner,
	host        = excluded.host
WHERE t.expires_at <= ` + now + ` OR t.owner = excluded.owner
RETURNING token, hold_count`
	s.q.peek = `SELECT owner, token, hold_count, host, expires_at - ` + now + ` FROM ` + t + ` WHERE lock_key = ?1`
	s.q.fence = `UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1`
	s.q.renew = `UPDATE ` + t + ` SET expires_at = MAX(expires_at, ` + now + ` + ?4)
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ` + now
	s.q.release = `UPDATE ` + t + ` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at + ?4 END
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ` + now
	s.q.releaseOwner = `UPDATE ` + t + ` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE acquired_at END
WHERE lock_key = ?1 AND owner = ?2 AND expires_at > ` + now
	s.q.forceRelease = `UPDATE ` + t + ` SET hold_count = 0, owner = '', expires_at = acquired_at
WHERE lock_key = ?1 AND token = ?2 AND expires_at > ` + now
	s.q.reap = `DELETE FROM ` + t + ` WHERE lock_key IN (
	SELECT lock_key FROM ` + t + ` WHERE expires_at < ` + now + ` - ?1 LIMIT ?2)`
	// No FOR UPDATE: the INSERT takes SQLite's one write lock.
	s.q.audit = `INSERT INTO ` + AuditTable + ` (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT ` + now + `, '` + ActionForceRelease + `', ?3, lock_key, token, owner, host, hold_count, ?4, ?5
FROM ` + t + ` WHERE lock_key = ?1 AND token = ?2 AND expires_at > ` + now
	s.holder = `SELECT token, owner, host FROM ` + t + ` WHERE lock_key = ?1 AND expires_at > ` + now
	s.live = `SELECT lock_key FROM ` + t + ` WHERE expires_at > ` + now + ` AND lock_key IN (`
	s.param = func(i int) string { return "?" + strconv.Itoa(i) }
	s.list = `SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	` + now + ` - acquired_at
FROM ` + t + ` WHERE expires_at > ` + now + ` ORDER BY lock_key`
	// Timestamps are microseconds since the Unix epoch.
	s.ddl = `CREATE TABLE ` + t + ` (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);`
	// No index on expires_at (migration 00018 dropped it): every take and
	// release moves the expiry, and keeping an index of it wrote two pages
	// more per acquire and release, a third of their cost. Only the reaper
	// and List look rows up by expiry; they read the table through.
	in, up := sqliteTriggerNames(n.index)
	if !strings.Contains(t, ".") {
		// A table in another schema (an attached database) has no
		// triggers: its takes bump the fence row themselves.
		s.ddl += "\n" + sqliteTriggers(t, in, up)
	}
	s.q.triggers = `SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ('` + strings.Trim(in, "`") + `', '` + strings.Trim(up, "`") + `')`
	return s
}

// sqliteTriggers is the DDL of a lock table's two triggers, in and up,
// which bump the fence row to every new token the table's rows take, in
// the statement that takes it. Migration 00018 gives sqllock_locks and
// sqllock_jobs the same.
func sqliteTriggers(t, in, up string) string {
	bump := ` BEGIN UPDATE sqllock_fence SET value = MAX(value, NEW.token) WHERE id = 1; END;`
	return `CREATE TRIGGER ` + in + ` AFTER INSERT ON ` + t + bump + `
CREATE TRIGGER ` + up + ` AFTER UPDATE OF token ON ` + t + ` WHEN NEW.token > OLD.token` + bump
}

// sqliteTriggerNames names a table's triggers after the name of its
// expires_at index (quoted, unique per schema like it, though SQLite's
// tables no longer have the index): <table>_token_in and _token_up.
func sqliteTriggerNames(index string) (in, up string) {
	base := strings.TrimSuffix(index, "_expires_at`")
	return base + "_token_in`", base + "_token_up`"
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
		// three more calls and half again the time of a take.
		err = takeSt.QueryRowContext(ctx, c.Key, c.Owner, c.Host, micros(c.TTL)).Scan(&a.Token, &a.Holds)
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
func (s *sqliteStore) renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, error) {
	conn, err := h.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var busyMS int64
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busyMS); err != nil {
		return 0, err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		return 0, err
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
		res, err := conn.ExecContext(ctx, s.q.renew, key, owner, token, micros(ttl))
		if err == nil {
			return res.RowsAffected()
		}
		switch {
		case !busySince.IsZero() && ctx.Err() != nil:
			// Ended while it looked again: still the busy database.
			return 0, busyError(time.Since(busySince), ctx.Err())
		case !sqlutil.IsBusy(err):
			return 0, err
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
			return 0, busyError(now.Sub(busySince), err)
		}
		select {
		case <-ctx.Done():
			return 0, busyError(time.Since(busySince), ctx.Err())
		case <-tick.C:
		}
	}
}

// busyError is a renewal that found SQLite's write lock taken for d;
// it wraps cause (SQLITE_BUSY, or the context's end).
func busyError(d time.Duration, cause error) error {
	return fmt.Errorf("database busy: another transaction held SQLite's write lock for %d ms: %w", d.Milliseconds(), cause)
}

func (s *sqliteStore) release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	return h.exec(ctx, s.q.release, key, owner, token, micros(keep))
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
