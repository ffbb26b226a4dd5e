package rowlease

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.MariaDB, newMariaDB) }

// mysqlStore serves MariaDB: an upsert that returns the row as it left it
// (INSERT ... RETURNING), whose owner says who won, tokens from
// sqllock_fence_seq, and positional arguments.
type mysqlStore struct {
	statements
	q     struct{ take, takeFree, renew, held, release, releaseOwner, forceRelease, audit, reapFind, reapDelete string }
	table string  // the table's name as configured, for gate names
	gates gateSQL // empty where the server's named locks do not serve (the MySQL path)
	rows  seenRows
}

func newMariaDB(n names, cfg Config) store {
	t := n.table
	const now = `UTC_TIMESTAMP(6)`
	s := &mysqlStore{table: cfg.Table}
	// Gates are named locks; one session keeps many (MariaDB 10.0.2 on),
	// and a wait takes fractional seconds. The waiter lets go of the gate
	// in the statement that got it, so it never keeps a holder's Locker
	// from taking it again. A user may kill, and see in PROCESSLIST, its
	// own sessions without any privilege.
	s.gates = gateSQL{
		arm:    `SELECT GET_LOCK(?, 0)`,
		disarm: `DO RELEASE_LOCK(?)`,
		all:    `DO RELEASE_ALL_LOCKS()`,
		wait:   `SELECT GET_LOCK(?, ?), RELEASE_LOCK(?)`,
		connID: `SELECT CONNECTION_ID()`,
		kill:   `KILL CONNECTION %d`,
		gone:   `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`,
	}
	// ON DUPLICATE KEY UPDATE assigns left to right and later clauses see
	// earlier ones, so owner and expires_at, which the conditions read,
	// come last. NEXTVAL in the update runs under the row lock.
	s.q.take = `INSERT INTO ` + t + ` (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, ?, 1, NEXTVAL(sqllock_fence_seq), ` + now + `, ` + now + ` + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	token       = IF(expires_at <= ` + now + `, NEXTVAL(sqllock_fence_seq), token),
	hold_count  = IF(expires_at <= ` + now + `, 1, IF(owner = VALUES(owner), hold_count + 1, hold_count)),
	acquired_at = IF(expires_at <= ` + now + `, VALUES(acquired_at), acquired_at),
	host        = IF(expires_at <= ` + now + ` OR owner = VALUES(owner), VALUES(host), host),
	owner       = IF(expires_at <= ` + now + `, VALUES(owner), owner),
	expires_at  = IF(owner = VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at)
RETURNING owner, token, hold_count, host, TIMESTAMPDIFF(MICROSECOND, ` + now + `, expires_at),
	TIMESTAMPDIFF(MICROSECOND, acquired_at, ` + now + `)`
	// The UPDATEs name the key's row through the primary key, never an
	// expires_at index (which MariaDB preferred when few rows were live,
	// and a table made before migration 00012 still has): a statement then
	// waits for the row lock of a take still in flight, and runs after it.
	// A give-back of a take cut off in flight relies on that
	// (Table.TakeDetached).
	pk := t + ` FORCE INDEX (PRIMARY)`
	// A claim that expects the key free, on a quiet key whose row this
	// store saw lately (seenRows), tries a plain UPDATE of a free row
	// first: the server runs it for less than the upsert
	// (docs/performance.md), and LAST_INSERT_ID(expr) brings
	// the token back in the reply, with no result set. NEXTVAL in SET runs
	// under the row lock, as in the upsert. A row that is absent, held, or
	// already the claimant's is left to the upsert, a second statement.
	s.q.takeFree = `UPDATE ` + pk + ` SET token = LAST_INSERT_ID(NEXTVAL(sqllock_fence_seq)),
	hold_count = 1, acquired_at = ` + now + `, host = ?, owner = ?, expires_at = ` + now + ` + INTERVAL ? MICROSECOND
WHERE lock_key = ? AND expires_at <= ` + now
	s.q.renew = `UPDATE ` + pk + ` SET expires_at = GREATEST(expires_at, ` + now + ` + INTERVAL ? MICROSECOND)
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > ` + now
	s.q.held = `SELECT 1 FROM ` + pk + ` WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > ` + now
	// Single-table UPDATE assigns left to right too: owner and expires_at
	// see hold_count already decremented.
	s.q.release = `UPDATE ` + pk + ` SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, acquired_at + INTERVAL ? MICROSECOND, expires_at)
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > ` + now
	s.q.releaseOwner = `UPDATE ` + pk + ` SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, acquired_at, expires_at)
WHERE lock_key = ? AND owner = ? AND expires_at > ` + now
	s.q.forceRelease = `UPDATE ` + pk + ` SET hold_count = 0, owner = '', expires_at = acquired_at
WHERE lock_key = ? AND token = ? AND expires_at > ` + now
	// With no index on expires_at a DELETE that looked for expired rows
	// would lock every row its scan passed, live keys included, until it
	// committed. So the reaper finds them with a plain read, which locks
	// nothing, and deletes them by primary key, each only if still expired
	// under its row lock.
	s.q.reapFind = `SELECT lock_key FROM ` + t + ` WHERE expires_at < ` + now + ` - INTERVAL ? MICROSECOND LIMIT ?`
	s.q.reapDelete = `DELETE FROM ` + t + ` WHERE expires_at < ` + now + ` - INTERVAL ? MICROSECOND AND lock_key IN (`
	s.q.audit = `INSERT INTO ` + AuditTable + ` (at, action, lock_table, lock_key, token, owner, host, hold_count, operator, reason)
SELECT ` + now + `, '` + ActionForceRelease + `', ?, lock_key, token, owner, host, hold_count, ?, ?
FROM ` + pk + ` WHERE lock_key = ? AND token = ? AND expires_at > ` + now + ` FOR UPDATE`
	s.holder = `SELECT token, owner, host FROM ` + t + ` WHERE lock_key = ? AND expires_at > ` + now
	s.live = `SELECT lock_key FROM ` + t + ` WHERE expires_at > ` + now + ` AND lock_key IN (`
	s.param = func(int) string { return "?" }
	s.list = `SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	TIMESTAMPDIFF(MICROSECOND, acquired_at, ` + now + `)
FROM ` + t + ` WHERE expires_at > ` + now + ` ORDER BY lock_key`
	// varbinary: keys and owners compare byte for byte, not by a collation
	// that ignores case and trailing spaces. No index on expires_at: every
	// take and release writes it, and so would write the index too
	// (migration 00012).
	s.ddl = `CREATE TABLE ` + t + ` (
    lock_key    varbinary(255) NOT NULL PRIMARY KEY,
    owner       varbinary(64)  NOT NULL,
    host        varchar(255)   NOT NULL,
    hold_count  int            NOT NULL,
    token       bigint         NOT NULL,
    acquired_at datetime(6)    NOT NULL,
    expires_at  datetime(6)    NOT NULL
) ENGINE=InnoDB;`
	return s
}

func (s *mysqlStore) take(ctx context.Context, h handle, c Claim) (Attempt, error) {
	var a Attempt
	if c.ExpectFree && s.rows.quiet(c.Key) {
		won, token, err := s.takeFree(ctx, h, c)
		if err != nil || won {
			return Attempt{Won: won, Token: token, Holds: 1}, err
		}
	}
	var owner string
	var left, held int64
	err := h.queryRow(ctx, s.q.take, []any{c.Key, c.Owner, c.Host, micros(c.TTL)}, &owner, &a.Token, &a.Holds, &a.Host, &left, &held)
	// The row as the upsert left it: ours if it names us (owners are
	// varbinary, compared byte for byte here as there).
	a.Won = owner == c.Owner
	if err == nil {
		s.rows.saw(c.Key, !a.Won)
	}
	a.Remaining = remaining(left)
	if !a.Won {
		a.HeldFor = remaining(held)
	}
	return a, err
}

// takeFree runs the plain update of c.Key's free row; it reports false
// when the update changed no row.
func (s *mysqlStore) takeFree(ctx context.Context, h handle, c Claim) (bool, int64, error) {
	res, err := h.stmts.Exec(ctx, h.DB, s.q.takeFree, c.Host, c.Owner, micros(c.TTL), c.Key)
	if err != nil {
		return false, 0, err
	}
	// The update always changes the token, so a row it matched counts as
	// changed.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, 0, err
	}
	token, err := res.LastInsertId()
	if err != nil {
		return false, 0, err
	}
	s.rows.saw(c.Key, false)
	return true, token, nil
}

func (s *mysqlStore) renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, error) {
	n, err := h.exec(ctx, s.q.renew, micros(ttl), key, owner, token)
	if err != nil || n == 1 {
		return n, err
	}
	// MariaDB counts changed rows, not matched ones: a renewal that leaves
	// a longer manual extension in place changes nothing, yet the row is
	// still ours.
	return h.count(ctx, s.q.held, key, owner, token)
}

func (s *mysqlStore) release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error) {
	return h.exec(ctx, s.q.release, micros(keep), key, owner, token)
}

func (s *mysqlStore) releaseOwner(ctx context.Context, h handle, key, owner string) (int64, error) {
	return h.exec(ctx, s.q.releaseOwner, key, owner)
}

func (s *mysqlStore) forceRelease(ctx context.Context, h handle, key string, token int64) (int64, error) {
	return h.exec(ctx, s.q.forceRelease, key, token)
}

func (s *mysqlStore) forceReleaseTx(ctx context.Context, tx *sql.Tx, key string, token int64) (int64, error) {
	return execTx(ctx, tx, s.q.forceRelease, key, token)
}

func (s *mysqlStore) audit(ctx context.Context, tx *sql.Tx, key string, token int64, table string, a Audit) (int64, error) {
	return execTx(ctx, tx, s.q.audit, table, a.Operator, a.Reason, key, token)
}

// reapChunk bounds the keys one DELETE names, well under the server's
// limit on placeholders.
const reapChunk = 1000

func (s *mysqlStore) reap(ctx context.Context, db *sql.DB, grace time.Duration, batch int) (int64, error) {
	rows, err := db.QueryContext(ctx, s.q.reapFind, micros(grace), batch)
	if err != nil {
		return 0, err
	}
	var keys []any
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, err
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var n int64
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), reapChunk)]
		keys = keys[len(chunk):]
		q := s.q.reapDelete + strings.Repeat("?, ", len(chunk)-1) + "?)"
		res, err := db.ExecContext(ctx, q, append([]any{micros(grace)}, chunk...)...)
		if err != nil {
			return n, err
		}
		d, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += d
	}
	return n, nil
}

func (s *mysqlStore) gateName(key string) string { return GateName(s.table, key) }

func (s *mysqlStore) gateStatements() gateSQL { return s.gates }
