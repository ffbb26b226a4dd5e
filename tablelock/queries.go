package tablelock

import (
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// queries holds a Locker's statements, built once in New with the quoted
// table name. Every time comparison runs on the database clock.
//
// Acquire returns one row: (won, token, hold_count, holder host, remaining
// microseconds of the holder). Parameters: key, owner, host, TTL in
// microseconds.
type queries struct {
	acquire string
	// SQLite only: the read of the holder after a refused upsert, and the
	// fence bump after a won one (SQLite has no sequence).
	holder, fence string
	release       string // key, owner, token [, channel]: one row (hold_count) on PostgreSQL, affected rows elsewhere
	renew         string // key, owner, token, TTL µs
	releaseKey    string // key, owner: owner-based release (ReleaseKey)
	forceRelease  string // key, token [, channel]
	holding       string // key: (token, owner, host) of its live holder
	list          string
	channel       string // PostgreSQL NOTIFY channel
}

// sqliteNow is the current time in microseconds since the epoch.
const sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

func buildQueries(d sqllock.Dialect, table string, asyncCommit bool) (queries, error) {
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return queries{}, fmt.Errorf("tablelock: table: %w", err)
	}
	var q queries
	switch d {
	case sqllock.Postgres:
		q.channel = sqlutil.NotifyChannel(table)
		// The SET list sees the old row, so every CASE asks about the holder
		// before this statement. nextval in SET runs after the row lock, so a
		// new holder's token is larger than any earlier holder's.
		from := ""
		if asyncCommit {
			// set_config(..., true) lasts for this statement's implicit
			// transaction; synchronous_commit is read at commit.
			from = ` FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc`
		}
		values := `VALUES ($1, $2, $3, 1, nextval('sqllock_fence_seq'), now(), now() + $4 * interval '1 microsecond')`
		if asyncCommit {
			values = `SELECT $1, $2, $3, 1, nextval('sqllock_fence_seq'), now(), now() + $4 * interval '1 microsecond'` + from
		}
		q.acquire = `WITH got AS (
	INSERT INTO ` + t + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
	` + values + `
	ON CONFLICT (lock_key) DO UPDATE SET
		token       = CASE WHEN t.expires_at > now() THEN t.token ELSE nextval('sqllock_fence_seq') END,
		hold_count  = CASE WHEN t.expires_at > now() THEN t.hold_count + 1 ELSE 1 END,
		acquired_at = CASE WHEN t.expires_at > now() THEN t.acquired_at ELSE now() END,
		expires_at  = GREATEST(t.expires_at, EXCLUDED.expires_at),
		owner       = EXCLUDED.owner,
		host        = EXCLUDED.host
	WHERE t.expires_at <= now() OR t.owner = EXCLUDED.owner
	RETURNING t.token, t.hold_count
)
SELECT true, token, hold_count, '', 0::bigint FROM got
UNION ALL
SELECT false, token, hold_count, host, (extract(epoch FROM expires_at - now()) * 1000000)::bigint
FROM ` + t + ` WHERE lock_key = $1 AND NOT EXISTS (SELECT 1 FROM got)`
		// The NOTIFY rides in the same statement: one round trip, and it is
		// delivered only if the release commits.
		q.release = `WITH r AS (
	UPDATE ` + t + ` SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE now() END` + from + `
	WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()
	RETURNING hold_count AS left_count
)
SELECT left_count, CASE WHEN left_count = 0 AND $4 <> '' THEN pg_notify($4, $1)::text END FROM r`
		q.renew = `UPDATE ` + t + ` SET expires_at = now() + $4 * interval '1 microsecond'` + from + `
WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()`
		q.releaseKey = `WITH r AS (
	UPDATE ` + t + ` SET hold_count = hold_count - 1,
		owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
		expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE now() END
	WHERE lock_key = $1 AND owner = $2 AND expires_at > now()
	RETURNING hold_count AS left_count
)
SELECT left_count, CASE WHEN left_count = 0 THEN pg_notify($3, $1)::text END FROM r`
		q.forceRelease = `WITH r AS (
	UPDATE ` + t + ` SET hold_count = 0, owner = '', expires_at = now()
	WHERE lock_key = $1 AND token = $2 AND expires_at > now()
	RETURNING lock_key
)
SELECT 1, pg_notify($3, $1)::text FROM r`
		q.holding = `SELECT token, owner, host FROM ` + t + ` WHERE lock_key = $1 AND expires_at > now()`
		q.list = `SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	(extract(epoch FROM now() - acquired_at) * 1000000)::bigint
FROM ` + t + ` WHERE expires_at > now() ORDER BY lock_key`

	case sqllock.MySQL:
		// ON DUPLICATE KEY UPDATE assigns left to right and later clauses see
		// earlier ones, so owner and expires_at, which the conditions read,
		// come last. NEXTVAL in the update runs under the row lock.
		const now = `UTC_TIMESTAMP(6)`
		q.acquire = `INSERT INTO ` + t + ` (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, ?, 1, NEXTVAL(sqllock_fence_seq), ` + now + `, ` + now + ` + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	token       = IF(expires_at <= ` + now + `, NEXTVAL(sqllock_fence_seq), token),
	hold_count  = IF(expires_at <= ` + now + `, 1, IF(owner = VALUES(owner), hold_count + 1, hold_count)),
	acquired_at = IF(expires_at <= ` + now + `, VALUES(acquired_at), acquired_at),
	host        = IF(expires_at <= ` + now + ` OR owner = VALUES(owner), VALUES(host), host),
	owner       = IF(expires_at <= ` + now + `, VALUES(owner), owner),
	expires_at  = IF(owner = VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at)
RETURNING owner, token, hold_count, host, TIMESTAMPDIFF(MICROSECOND, ` + now + `, expires_at)`
		q.release = `UPDATE ` + t + ` SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, ` + now + `, expires_at)
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > ` + now
		q.renew = `UPDATE ` + t + ` SET expires_at = ` + now + ` + INTERVAL ? MICROSECOND
WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > ` + now
		q.releaseKey = `UPDATE ` + t + ` SET hold_count = hold_count - 1,
	owner      = IF(hold_count = 0, '', owner),
	expires_at = IF(hold_count = 0, ` + now + `, expires_at)
WHERE lock_key = ? AND owner = ? AND expires_at > ` + now
		q.forceRelease = `UPDATE ` + t + ` SET hold_count = 0, owner = '', expires_at = ` + now + `
WHERE lock_key = ? AND token = ? AND expires_at > ` + now
		q.holding = `SELECT token, owner, host FROM ` + t + ` WHERE lock_key = ? AND expires_at > ` + now
		q.list = `SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	TIMESTAMPDIFF(MICROSECOND, acquired_at, ` + now + `)
FROM ` + t + ` WHERE expires_at > ` + now + ` ORDER BY lock_key`

	case sqllock.SQLite:
		// Runs inside a transaction: SQLite has one writer at a time, so the
		// read of the fence row and its bump cannot interleave with another.
		const now = sqliteNow
		q.acquire = `INSERT INTO ` + t + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, ?3, 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), ` + now + `, ` + now + ` + ?4)
ON CONFLICT (lock_key) DO UPDATE SET
	token       = CASE WHEN t.expires_at > ` + now + ` THEN t.token ELSE excluded.token END,
	hold_count  = CASE WHEN t.expires_at > ` + now + ` THEN t.hold_count + 1 ELSE 1 END,
	acquired_at = CASE WHEN t.expires_at > ` + now + ` THEN t.acquired_at ELSE excluded.acquired_at END,
	expires_at  = MAX(t.expires_at, excluded.expires_at),
	owner       = excluded.owner,
	host        = excluded.host
WHERE t.expires_at <= ` + now + ` OR t.owner = excluded.owner
RETURNING true, token, hold_count, '', 0`
		q.holder = `SELECT owner, host, expires_at - ` + now + ` FROM ` + t + ` WHERE lock_key = ?1`
		q.fence = `UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1`
		q.release = `UPDATE ` + t + ` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE ` + now + ` END
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ` + now
		q.renew = `UPDATE ` + t + ` SET expires_at = ` + now + ` + ?4
WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ` + now
		q.releaseKey = `UPDATE ` + t + ` SET hold_count = hold_count - 1,
	owner      = CASE WHEN hold_count > 1 THEN owner ELSE '' END,
	expires_at = CASE WHEN hold_count > 1 THEN expires_at ELSE ` + now + ` END
WHERE lock_key = ?1 AND owner = ?2 AND expires_at > ` + now
		q.forceRelease = `UPDATE ` + t + ` SET hold_count = 0, owner = '', expires_at = ` + now + `
WHERE lock_key = ?1 AND token = ?2 AND expires_at > ` + now
		q.holding = `SELECT token, owner, host FROM ` + t + ` WHERE lock_key = ?1 AND expires_at > ` + now
		q.list = `SELECT lock_key, owner, host, hold_count, token, acquired_at, expires_at,
	` + now + ` - acquired_at
FROM ` + t + ` WHERE expires_at > ` + now + ` ORDER BY lock_key`
	default:
		return queries{}, fmt.Errorf("tablelock: %w: dialect %v", sqllock.ErrUnsupported, d)
	}
	return q, nil
}
