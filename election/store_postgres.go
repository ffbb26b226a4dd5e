package election

import (
	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/tablelock"
)

func init() {
	stores[sqllock.Postgres] = queries{
		// The term row announces itself to Observe, in its own
		// statement: delivered only if the row commits, and one NOTIFY
		// per leadership, nothing on renewals or resigns (Observe
		// delivers leaderships; a resign is announced to campaigners by
		// the lock table, when one waits).
		insert: `WITH t AS (
	INSERT INTO ` + Table + ` (name, term, value, since) VALUES ($1, $2, $3, now()) RETURNING name
)
SELECT pg_notify($4, $5) FROM t`,
		announces: true,
		leader: `SELECT e.value, e.term, e.since FROM ` + Table + ` e JOIN ` + tablelock.DefaultTable + ` l ON l.token = e.term
WHERE e.name = $1 AND l.lock_key = $2 AND l.expires_at > now()`,
		since: `SELECT value, term, since FROM ` + Table + ` WHERE name = $1 AND term > $2 ORDER BY term`,
		start: `SELECT COALESCE(max(CASE WHEN l.lock_key IS NOT NULL THEN e.term - 1 END), max(e.term), 0)
FROM ` + Table + ` e LEFT JOIN ` + tablelock.DefaultTable + ` l ON l.lock_key = $1 AND l.token = e.term AND l.expires_at > now()
WHERE e.name = $2`,
	}
}
