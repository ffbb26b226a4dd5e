package jobguard

import (
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// queries holds a Guard's statements, built once in New with the quoted
// table name. Every time comparison runs on the database clock. Jobs fire
// once per period, so the statements are not prepared ahead: the hot paths
// that need that are the strategies', not this one.
type queries struct {
	// acquire takes the row if it is free or its locked_until has passed.
	// Parameters: name, owner, locked_by, AtMost in µs. PostgreSQL returns
	// (won, token, holder, remaining µs); MySQL (owner, token, holder,
	// remaining µs); SQLite (token) when won and no row otherwise.
	acquire string
	holder  string // SQLite: name → (locked_by, remaining µs)
	fence   string // SQLite: bump the fence row to the token issued
	// release keeps the row until locked_at + AtLeast, or frees it now.
	// Parameters: name, token, AtLeast µs (MySQL: AtLeast µs, name, token).
	release string
	// giveBack frees the row at once if owner's try took it. Parameters:
	// name, owner.
	giveBack string
	// forceRelease frees the row at once if the run of token holds it.
	// Parameters: name, token.
	forceRelease string
	holding      string // name → (token, locked_by) of the run holding it
	list         string
}

const sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

func buildQueries(d sqllock.Dialect, table string) (queries, error) {
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return queries{}, fmt.Errorf("jobguard: table: %w", err)
	}
	var q queries
	switch d {
	case sqllock.Postgres:
		// nextval in SET runs under the row lock: a new run's token is larger
		// than any earlier run's. The final SELECT reads the holder from the
		// statement's snapshot when the upsert took nothing.
		q.acquire = `WITH got AS (
	INSERT INTO ` + t + ` AS t (name, owner, locked_by, token, locked_at, locked_until)
	VALUES ($1, $2, $3, nextval('sqllock_fence_seq'), now(), now() + $4 * interval '1 microsecond')
	ON CONFLICT (name) DO UPDATE SET
		token        = nextval('sqllock_fence_seq'),
		owner        = EXCLUDED.owner,
		locked_by    = EXCLUDED.locked_by,
		locked_at    = EXCLUDED.locked_at,
		locked_until = EXCLUDED.locked_until
	WHERE t.locked_until <= now()
	RETURNING t.token
)
SELECT true, token, '', 0::bigint FROM got
UNION ALL
SELECT false, token, locked_by, (extract(epoch FROM locked_until - now()) * 1000000)::bigint
FROM ` + t + ` WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM got)`
		q.release = `UPDATE ` + t + ` SET owner = '',
	locked_until = GREATEST(locked_at + $3 * interval '1 microsecond', now())
WHERE name = $1 AND token = $2 AND locked_until > now()`
		q.giveBack = `UPDATE ` + t + ` SET owner = '', locked_until = now() WHERE name = $1 AND owner = $2 AND locked_until > now()`
		q.forceRelease = `UPDATE ` + t + ` SET owner = '', locked_until = now() WHERE name = $1 AND token = $2 AND locked_until > now()`
		q.holding = `SELECT token, locked_by FROM ` + t + ` WHERE name = $1 AND locked_until > now()`
		q.list = `SELECT name, owner, locked_by, token, locked_at, locked_until FROM ` + t + `
WHERE locked_until > now() ORDER BY name`

	case sqllock.MySQL:
		// ON DUPLICATE KEY UPDATE assigns left to right and later clauses see
		// earlier ones: locked_until, which every condition reads, comes last.
		const now = `UTC_TIMESTAMP(6)`
		const free = `locked_until <= ` + now
		q.acquire = `INSERT INTO ` + t + ` (name, owner, locked_by, token, locked_at, locked_until)
VALUES (?, ?, ?, NEXTVAL(sqllock_fence_seq), ` + now + `, ` + now + ` + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	token        = IF(` + free + `, NEXTVAL(sqllock_fence_seq), token),
	owner        = IF(` + free + `, VALUES(owner), owner),
	locked_by    = IF(` + free + `, VALUES(locked_by), locked_by),
	locked_at    = IF(` + free + `, VALUES(locked_at), locked_at),
	locked_until = IF(` + free + `, VALUES(locked_until), locked_until)
RETURNING owner, token, locked_by, TIMESTAMPDIFF(MICROSECOND, ` + now + `, locked_until)`
		q.release = `UPDATE ` + t + ` SET owner = '',
	locked_until = GREATEST(locked_at + INTERVAL ? MICROSECOND, ` + now + `)
WHERE name = ? AND token = ? AND locked_until > ` + now
		q.giveBack = `UPDATE ` + t + ` SET owner = '', locked_until = ` + now + ` WHERE name = ? AND owner = ? AND locked_until > ` + now
		q.forceRelease = `UPDATE ` + t + ` SET owner = '', locked_until = ` + now + ` WHERE name = ? AND token = ? AND locked_until > ` + now
		q.holding = `SELECT token, locked_by FROM ` + t + ` WHERE name = ? AND locked_until > ` + now
		q.list = `SELECT name, owner, locked_by, token, locked_at, locked_until FROM ` + t + `
WHERE locked_until > ` + now + ` ORDER BY name`

	case sqllock.SQLite:
		const now = sqliteNow
		q.acquire = `INSERT INTO ` + t + ` AS t (name, owner, locked_by, token, locked_at, locked_until)
VALUES (?1, ?2, ?3, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), ` + now + `, ` + now + ` + ?4)
ON CONFLICT (name) DO UPDATE SET
	token        = excluded.token,
	owner        = excluded.owner,
	locked_by    = excluded.locked_by,
	locked_at    = excluded.locked_at,
	locked_until = excluded.locked_until
WHERE t.locked_until <= ` + now + `
RETURNING token`
		q.holder = `SELECT locked_by, locked_until - ` + now + ` FROM ` + t + ` WHERE name = ?1`
		q.fence = `UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1`
		q.release = `UPDATE ` + t + ` SET owner = '',
	locked_until = MAX(locked_at + ?3, ` + now + `)
WHERE name = ?1 AND token = ?2 AND locked_until > ` + now
		q.giveBack = `UPDATE ` + t + ` SET owner = '', locked_until = ` + now + ` WHERE name = ?1 AND owner = ?2 AND locked_until > ` + now
		q.forceRelease = `UPDATE ` + t + ` SET owner = '', locked_until = ` + now + ` WHERE name = ?1 AND token = ?2 AND locked_until > ` + now
		q.holding = `SELECT token, locked_by FROM ` + t + ` WHERE name = ?1 AND locked_until > ` + now
		q.list = `SELECT name, owner, locked_by, token, locked_at, locked_until FROM ` + t + `
WHERE locked_until > ` + now + ` ORDER BY name`
	default:
		return queries{}, fmt.Errorf("jobguard: %w: dialect %v", sqllock.ErrUnsupported, d)
	}
	return q, nil
}
