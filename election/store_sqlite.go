package election

import (
	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/tablelock"
)

func init() {
	// Timestamps are microseconds since the epoch, SQLite's clock read
	// with unixepoch('subsec').
	stores[sqllock.SQLite] = queries{
		insert: `INSERT INTO ` + Table + ` (name, term, value, since) VALUES (?1, ?2, ?3, CAST(unixepoch('subsec') * 1000000 AS INTEGER))`,
		leader: `SELECT e.value, e.term, e.since FROM ` + Table + ` e JOIN ` + tablelock.DefaultTable + ` l ON l.token = e.term
WHERE e.name = ?1 AND l.lock_key = ?2 AND l.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)`,
		since: `SELECT value, term, since FROM ` + Table + ` WHERE name = ?1 AND term > ?2 ORDER BY term`,
		start: `SELECT COALESCE(max(CASE WHEN l.lock_key IS NOT NULL THEN e.term - 1 END), max(e.term), 0)
FROM ` + Table + ` e LEFT JOIN ` + tablelock.DefaultTable + ` l ON l.lock_key = ?1 AND l.token = e.term AND l.expires_at > CAST(unixepoch('subsec') * 1000000 AS INTEGER)
WHERE e.name = ?2`,
	}
}
