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
	// returns (token, pg_backend_pid()); token is 0 when this transaction
	// inserted the row, and stamp then issues it. The ON CONFLICT SET list
	// runs after the row lock is granted, so nextval is drawn while held.
	lock, stamp string
	// tryLock is lock with NOWAIT, for an existing row; tryPrepare and
	// tryInsert create a missing row with a short lock_timeout, which
	// stampRestore then sets back.
	tryLock, tryPrepare, tryInsert, stampRestore string

	// MariaDB. lockNoWait and lockWait return (NEXTVAL, CONNECTION_ID());
	// InnoDB locks the row before the select list is evaluated, so the
	// token is drawn while held. ensure creates a missing row in its own
	// autocommit statement without waiting on a held one.
	lockNoWait, lockWait, ensure string

	// alive lists which of a comma-separated set of session ids still hold
	// an open session (and, on PostgreSQL, an open transaction).
	alive string
}

const pgSeq = `nextval('sqllock_fence_seq')`

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
RETURNING r.token, pg_backend_pid()`
		q.stamp = `UPDATE ` + t + ` SET token = ` + pgSeq + ` WHERE lock_key = $1 RETURNING token`
		// The sub-select takes the lock NOWAIT before the outer UPDATE
		// evaluates its SET list.
		q.tryLock = `UPDATE ` + t + ` SET token = ` + pgSeq + `
WHERE lock_key = (SELECT lock_key FROM ` + t + ` WHERE lock_key = $1 FOR UPDATE NOWAIT)
RETURNING token, pg_backend_pid()`
		q.tryPrepare = `SELECT current_setting('lock_timeout'), set_config('lock_timeout', '` + pgTryInsertTimeout + `', true)`
		q.tryInsert = `INSERT INTO ` + t + ` (lock_key, token) VALUES ($1, 0) ON CONFLICT (lock_key) DO NOTHING RETURNING token`
		q.stampRestore = `UPDATE ` + t + ` SET token = ` + pgSeq + ` WHERE lock_key = $1
RETURNING token, pg_backend_pid(), set_config('lock_timeout', $2, true)`
		q.alive = `SELECT pid FROM pg_stat_activity
WHERE pid = ANY(string_to_array($1, ',')::int[]) AND backend_xid IS NOT NULL`
	case sqllock.MySQL:
		sel := `SELECT NEXTVAL(sqllock_fence_seq), CONNECTION_ID() FROM ` + t + ` WHERE lock_key = ? FOR UPDATE`
		q.lockNoWait = sel + ` NOWAIT`
		q.lockWait = sel + fmt.Sprintf(` WAIT %d`, mysqlWaitSeconds)
		q.ensure = `SET STATEMENT innodb_lock_wait_timeout = 0 FOR INSERT IGNORE INTO ` + t + ` (lock_key) VALUES (?)`
		q.alive = `SELECT ID FROM information_schema.PROCESSLIST WHERE FIND_IN_SET(ID, ?) > 0`
	default:
		return queries{}, fmt.Errorf("rowlock: %w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	return q, nil
}
