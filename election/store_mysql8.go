package election

import "github.com/sqllock/sqllock"

func init() {
	q := mysqlQueries()
	// MySQL 8 has no SET STATEMENT: Campaign refuses a session that is not
	// strict before it campaigns, and the insert writes nothing in one (a
	// pool's sessions may differ).
	q.insert = `INSERT INTO ` + Table + ` (name, term, value, since)
SELECT ?, ?, ?, UTC_TIMESTAMP(6) FROM DUAL WHERE @@SESSION.sql_mode LIKE '%STRICT%'`
	q.strict = `SELECT @@SESSION.sql_mode`
	stores[sqllock.MySQL] = q
}
