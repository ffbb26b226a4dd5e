package rowlock

import (
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// mysqlWaitSeconds bounds one blocking locking read on MariaDB. A blocked
// Acquire repeats it until its context ends, so the context, not
// innodb_lock_wait_timeout, bounds the wait; and a wait orphaned by a
// cancel that could not reach the server ends within this bound.
const mysqlWaitSeconds = 5

// pgTryInsertTimeout bounds how long TryAcquire on PostgreSQL waits on
// another transaction's uncommitted insert of the same key: INSERT has no
// NOWAIT.
const pgTryInsertTimeout = "10ms"

// queries holds a Locker's statements, built once in New with the quoted
// table name.
type queries struct {
	// PostgreSQL. lock takes the row lock, creating the row if needed, and
	// returns (token, pg_backend_pid(), xid); token is 0 when this
	// transaction inserted the row, and stamp then issues it. The ON
	// CONFLICT SET list runs after the row lock is granted, so nextval is
	// drawn while held.
	lock, stamp string
	// tryLock is lock with NOWAIT, for an existing row; tryPrepare and
	// tryInsert create a missing row with a short lock_timeout, which
	// stampRestore then sets back.
	tryLock, tryPrepare, tryInsert, stampRestore string

	// MariaDB. lockNoWait and lockWait return NEXTVAL; InnoDB locks the row
	// before the select list is evaluated, so the token is drawn while held.
	// ensure creates a missing row in its own autocommit statement without
	// waiting on a held one. session returns (CONNECTION_ID(), server
	// start), read once per connection (see sessions).
	lockNoWait, lockWait, ensure, session string

	// alive finds which held leases are still alive; see monitor.check.
	alive string
}

const pgSeq = `nextval('sqllock_fence_seq')`

// pgXid is the lock's transaction id as pg_stat_activity.backend_xid shows
// it (32 bits); the lock statements write, so it is assigned already.
const pgXid = `pg_current_xact_id()::xid`

// myStart is when the MariaDB server started, in Unix seconds: exact, as
// UNIX_TIMESTAMP() and Uptime both read the statement's start. Not the
// start-time field of UUID_SHORT(), which its 24-bit counter carries into
// once per 2^24 calls server-wide, so that it drifts later than the start.
const myStart = `UNIX_TIMESTAMP() - CAST((SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS
  WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)`

func buildQueries(d sqllock.Dialect, table string) (queries, error) {
	if d == sqllock.SQLite {
		return queries{}, fmt.Errorf("rowlock: %w: SQLite has no SELECT ... FOR UPDATE row locks; use tablelock", sqllock.ErrUnsupported)
	}
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return queries{}, fmt.Errorf("rowlock: table: %w", err)
	}
	var q queries
	switch d {
	case sqllock.Postgres:
		q.lock = `INSERT INTO ` + t + ` AS r (lock_key, token) VALUES ($1, 0)
ON CONFLICT (lock_key) DO UPDATE SET token = ` + pgSeq + `
RETURNING r.token, pg_backend_pid(), ` + pgXid
		q.stamp = `UPDATE ` + t + ` SET token = ` + pgSeq + ` WHERE lock_key = $1 RETURNING token`
		// The sub-select takes the lock NOWAIT before the outer UPDATE
		// evaluates its SET list.
		q.tryLock = `UPDATE ` + t + ` SET token = ` + pgSeq + `
WHERE lock_key = (SELECT lock_key FROM ` + t + ` WHERE lock_key = $1 FOR UPDATE NOWAIT)
RETURNING token, pg_backend_pid(), ` + pgXid
		q.tryPrepare = `SELECT current_setting('lock_timeout'), set_config('lock_timeout', '` + pgTryInsertTimeout + `', true)`
		q.tryInsert = `INSERT INTO ` + t + ` (lock_key, token) VALUES ($1, 0) ON CONFLICT (lock_key) DO NOTHING RETURNING token`
		q.stampRestore = `UPDATE ` + t + ` SET token = ` + pgSeq + ` WHERE lock_key = $1
RETURNING token, pg_backend_pid(), ` + pgXid + `, set_config('lock_timeout', $2, true)`
		q.alive = `SELECT h.i FROM unnest(string_to_array($1, ',')::int[], string_to_array($2, ',')::xid[])
  WITH ORDINALITY AS h(pid, xid, i)
JOIN pg_stat_activity a ON a.pid = h.pid AND a.backend_xid = h.xid`
	case sqllock.MySQL:
		sel := `SELECT NEXTVAL(sqllock_fence_seq) FROM ` + t + ` WHERE lock_key = ? FOR UPDATE`
		q.lockNoWait = sel + ` NOWAIT`
		q.lockWait = sel + fmt.Sprintf(` WAIT %d`, mysqlWaitSeconds)
		q.ensure = `SET STATEMENT innodb_lock_wait_timeout = 0 FOR INSERT IGNORE INTO ` + t + ` (lock_key) VALUES (?)`
		q.session = `SELECT CONNECTION_ID(), ` + myStart
		q.alive = `SELECT ID, ` + myStart + `
FROM information_schema.PROCESSLIST WHERE FIND_IN_SET(ID, ?) > 0`
	default:
		return queries{}, fmt.Errorf("rowlock: %w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	return q, nil
}
