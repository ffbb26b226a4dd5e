package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
)

func init() { register(sqllock.Postgres, postgresDialect{}) }

// postgresDialect is PostgreSQL: $n placeholders, double-quoted names.
type postgresDialect struct{}

func (postgresDialect) quote(name string) (string, error) {
	return dialect.QuoteIdent(sqllock.Postgres, name)
}

func (postgresDialect) placeholder(i int) string { return "$" + strconv.Itoa(i) }

func (postgresDialect) tokenQuery() string { return `SELECT sqllock_next_token()` }

func (postgresDialect) schema(t string) string {
	return `CREATE TABLE ` + t + ` (
    lock_key varchar(255) NOT NULL PRIMARY KEY,
    token    bigint       NOT NULL DEFAULT 0
);`
}

// Tokens come from sqllock_next_token() (dialect.PostgresToken). The
// holder is the session's pid and the lock's transaction id as
// pg_stat_activity.backend_xid shows it (pg_current_xact_id()::xid, 32
// bits); the lock statements write, so the xid is assigned already.

// The prepared statements, by their index in postgresStore.prepared.
const (
	pgLock = iota
	pgStamp
	pgTryLock
	pgTryInsert
	pgStampRestore
	pgShare
	pgTryShare
	pgShareInsert
)

// postgresStore takes a row lock with an upsert that creates the key's row
// when it is missing, and reads the holder (pid and xid) back from the
// statement that took the lock.
type postgresStore struct {
	env      storeEnv
	prepared []string // by pgLock...
	// tryPrepare sets a short lock_timeout for tryInsert, and returns the
	// old one for stampRestore to set back.
	tryPrepare string
	aliveQuery string
	goneQuery  string
	sessions   sessionCache
}

func (postgresDialect) newStore(t string, env storeEnv) store {
	s := &postgresStore{env: env, prepared: make([]string, 8)}
	// lock returns (token, pid, xid); the token is 0 when this transaction
	// inserted the row, and stamp then issues it. The ON CONFLICT SET list
	// runs after the row lock is granted, so the token is drawn while held.
	s.prepared[pgLock] = `INSERT INTO ` + t + ` AS r (lock_key, token) VALUES ($1, 0)
ON CONFLICT (lock_key) DO UPDATE SET token = sqllock_next_token()
RETURNING r.token, pg_backend_pid(), pg_current_xact_id()::xid`
	s.prepared[pgStamp] = `UPDATE ` + t + ` SET token = sqllock_next_token() WHERE lock_key = $1 RETURNING token`
	// tryLock is lock with NOWAIT, for an existing row. The sub-select takes
	// the lock NOWAIT before the outer UPDATE evaluates its SET list.
	s.prepared[pgTryLock] = `UPDATE ` + t + ` SET token = sqllock_next_token()
WHERE lock_key = (SELECT lock_key FROM ` + t + ` WHERE lock_key = $1 FOR UPDATE NOWAIT)
RETURNING token, pg_backend_pid(), pg_current_xact_id()::xid`
	s.prepared[pgTryInsert] = `INSERT INTO ` + t + ` (lock_key, token) VALUES ($1, 0) ON CONFLICT (lock_key) DO NOTHING RETURNING token`
	s.prepared[pgStampRestore] = `UPDATE ` + t + ` SET token = sqllock_next_token() WHERE lock_key = $1
RETURNING token, pg_backend_pid(), pg_current_xact_id()::xid, set_config('lock_timeout', $2, true)`
	// share takes a shared row lock and then draws the token: a sub-select
	// with FOR SHARE is never flattened, so the outer select list runs on
	// the row once locked. Nothing is written to the row: readers overlap.
	s.prepared[pgShare] = `SELECT sqllock_next_token(), pg_backend_pid(), pg_current_xact_id()::xid
FROM (SELECT lock_key FROM ` + t + ` WHERE lock_key = $1 FOR SHARE) s`
	s.prepared[pgTryShare] = `SELECT sqllock_next_token(), pg_backend_pid(), pg_current_xact_id()::xid
FROM (SELECT lock_key FROM ` + t + ` WHERE lock_key = $1 FOR SHARE NOWAIT) s`
	s.prepared[pgShareInsert] = `INSERT INTO ` + t + ` (lock_key, token) VALUES ($1, 0) ON CONFLICT (lock_key) DO NOTHING`
	// TryAcquire waits at most 10ms on another transaction's uncommitted
	// insert of the same key: INSERT has no NOWAIT.
	s.tryPrepare = `SELECT current_setting('lock_timeout'), set_config('lock_timeout', '10ms', true)`
	s.aliveQuery = `SELECT h.i FROM unnest(string_to_array($1, ',')::int[], string_to_array($2, ',')::xid[])
  WITH ORDINALITY AS h(pid, xid, i)
JOIN pg_stat_activity a ON a.pid = h.pid AND a.backend_xid = h.xid`
	s.goneQuery = `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(string_to_array($1, ',')::int[])`
	return s
}

func (s *postgresStore) queries() []string { return s.prepared }

// session returns the connection's pid, read once per connection, for
// gone. The lock statements return the whole holder.
func (s *postgresStore) session(ctx context.Context, conn *sql.Conn) (holder, error) {
	return s.sessions.get(conn, func() (h holder, err error) {
		err = conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&h.session)
		return h, err
	})
}

// lock waits in the server's queue with a plain locking upsert. A
// cancelled wait ends on the server too: pgx (like lib/pq) sends a cancel
// request when a query's context ends.
func (s *postgresStore) lock(ctx context.Context, a *attempt, key string, wait bool) (g grant, retry bool, err error) {
	if a.shared {
		return s.share(ctx, a, key, wait)
	}
	if !wait {
		return s.try(ctx, a, key)
	}
	err = a.stmt(ctx, pgLock).QueryRowContext(ctx, key).Scan(&g.token, &g.session, &g.life)
	if cerr := ctxend.Err(ctx); cerr != nil {
		return grant{}, false, cerr
	}
	if err == nil && g.token == 0 {
		// This transaction created the row, and holds it: draw the token.
		err = a.stmt(ctx, pgStamp).QueryRowContext(ctx, key).Scan(&g.token)
	}
	return g, false, err
}

// try locks an existing row NOWAIT; a missing row it creates in this
// transaction, waiting only briefly on another transaction's uncommitted
// insert of the same key.
func (s *postgresStore) try(ctx context.Context, a *attempt, key string) (g grant, retry bool, err error) {
	err = a.stmt(ctx, pgTryLock).QueryRowContext(ctx, key).Scan(&g.token, &g.session, &g.life)
	switch {
	case err == nil:
		return g, false, nil
	case dberr.IsLockNotAvailable(err):
		return grant{}, false, errRefused
	case !errors.Is(err, sql.ErrNoRows):
		return grant{}, false, err
	}
	var prev, set string
	if err := a.tx.QueryRowContext(ctx, s.tryPrepare).Scan(&prev, &set); err != nil {
		return grant{}, false, err
	}
	var zero int64
	err = a.stmt(ctx, pgTryInsert).QueryRowContext(ctx, key).Scan(&zero)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return grant{}, true, nil // committed by someone else meanwhile
	case dberr.IsLockNotAvailable(err):
		return grant{}, false, errRefused
	case err != nil:
		return grant{}, false, err
	}
	err = a.stmt(ctx, pgStampRestore).QueryRowContext(ctx, key, prev).Scan(&g.token, &g.session, &g.life, &set)
	return g, false, err
}

// share takes a shared row lock. A missing row is created and committed
// by this attempt's transaction (a reader holding an uncommitted row would
// exclude the other readers), and the Locker tries again.
func (s *postgresStore) share(ctx context.Context, a *attempt, key string, wait bool) (g grant, retry bool, err error) {
	q := pgShare
	if !wait {
		q = pgTryShare
	}
	err = a.stmt(ctx, q).QueryRowContext(ctx, key).Scan(&g.token, &g.session, &g.life)
	switch {
	case ctxend.Err(ctx) != nil:
		return grant{}, false, ctxend.Err(ctx)
	case err == nil:
		return g, false, nil
	case dberr.IsLockNotAvailable(err):
		return grant{}, false, errRefused
	case !errors.Is(err, sql.ErrNoRows):
		return grant{}, false, err
	}
	if !wait {
		// Wait only briefly on another transaction's uncommitted insert.
		var prev, set string
		if err := a.tx.QueryRowContext(ctx, s.tryPrepare).Scan(&prev, &set); err != nil {
			return grant{}, false, err
		}
	}
	if _, err := a.tx.ExecContext(ctx, s.prepared[pgShareInsert], key); err != nil {
		if dberr.IsLockNotAvailable(err) {
			return grant{}, false, errRefused
		}
		return grant{}, false, err
	}
	if err := a.tx.Commit(); err != nil {
		return grant{}, false, err
	}
	return grant{}, true, nil
}

// alive looks each hold's pid and transaction id up in pg_stat_activity. An
// xid names one transaction and xids keep counting across restarts: exact.
// Not xact_start, which is NULL under track_activities = off.
func (s *postgresStore) alive(ctx context.Context, held []holder) ([]bool, error) {
	xids := make([]string, len(held))
	for i, h := range held {
		xids[i] = strconv.FormatInt(h.life, 10)
	}
	rows, err := s.env.stmts.Query(ctx, s.env.db, s.aliveQuery, joinSessions(held), strings.Join(xids, ","))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	alive := make([]bool, len(held))
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			return nil, err
		}
		if i >= 1 && i <= len(held) {
			alive[i-1] = true // WITH ORDINALITY counts from 1
		}
	}
	return alive, rows.Err()
}

// gone looks the pids up in pg_stat_activity. A pid reused meanwhile only
// makes the caller wait longer.
func (s *postgresStore) gone(ctx context.Context, sessions []holder) (bool, error) {
	var n int
	err := s.env.stmts.QueryRow(ctx, s.env.db, s.goneQuery, []any{joinSessions(sessions)}, &n)
	return err == nil && n == 0, err
}
