package election

import (
	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/tablelock"
)

func init() {
	q := mysqlQueries()
	// Strict for this statement whatever the session's sql_mode: a value
	// the column cannot hold is refused, never stored altered (truncated,
	// or '?' for a character its character set lacks).
	q.insert = `SET STATEMENT sql_mode = CONCAT(@@SESSION.sql_mode, ',STRICT_ALL_TABLES') FOR
INSERT INTO ` + Table + ` (name, term, value, since) VALUES (?, ?, ?, UTC_TIMESTAMP(6))`
	stores[sqllock.MariaDB] = q
}

// mysqlQueries are the reads of the MySQL family, MariaDB's and MySQL 8's
// (store_mysql8.go) alike.
func mysqlQueries() queries {
	return queries{
		leader: `SELECT e.value, e.term, e.since FROM ` + Table + ` e JOIN ` + tablelock.DefaultTable + ` l ON l.token = e.term
WHERE e.name = ? AND l.lock_key = ? AND l.expires_at > UTC_TIMESTAMP(6)`,
		since: `SELECT value, term, since FROM ` + Table + ` WHERE name = ? AND term > ? ORDER BY term`,
		start: `SELECT COALESCE(MAX(CASE WHEN l.lock_key IS NOT NULL THEN e.term - 1 END), MAX(e.term), 0)
FROM ` + Table + ` e LEFT JOIN ` + tablelock.DefaultTable + ` l ON l.lock_key = ? AND l.token = e.term AND l.expires_at > UTC_TIMESTAMP(6)
WHERE e.name = ?`,
	}
}
