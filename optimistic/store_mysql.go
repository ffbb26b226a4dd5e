package optimistic

import "github.com/sqllock/sqllock"

func init() {
	register(sqllock.MariaDB, mysqlStore{syntax{dialect: sqllock.MariaDB, mark: "?"}})
}

// mysqlStore: backquoted names, ? parameters. The stamp needs MariaDB
// (SEQUENCE, INSERT ... RETURNING).
type mysqlStore struct{ syntax }

// The version is drawn in the ON DUPLICATE KEY assignment, under the row
// lock, as on PostgreSQL.
func (mysqlStore) versions(t string) versionStore {
	return versionSQL{
		stampQuery: `INSERT INTO ` + t + ` (lock_key, version) VALUES (?, NEXTVAL(sqllock_fence_seq))
ON DUPLICATE KEY UPDATE version = NEXTVAL(sqllock_fence_seq) RETURNING version`,
		releaseQuery: `UPDATE ` + t + ` SET version = -version WHERE lock_key = ? AND version = ?`,
		readQuery:    `SELECT version FROM ` + t + ` WHERE lock_key = ?`,
	}
}

// varbinary: items compare byte for byte, not by a collation that ignores
// case and trailing spaces.
func (mysqlStore) counterSchema(t string) string {
	return `CREATE TABLE ` + t + ` (item varbinary(255) NOT NULL, stripe int NOT NULL, qty bigint NOT NULL, PRIMARY KEY (item, stripe)) ENGINE=InnoDB`
}

func (mysqlStore) counter(t string) counterQueries {
	return counterQueries{
		take:   `UPDATE ` + t + ` SET qty = qty - 1 WHERE item = ? AND stripe = ? AND qty > 0`,
		total:  `SELECT COALESCE(SUM(qty), 0) FROM ` + t + ` WHERE item = ?`,
		left:   `SELECT COALESCE(SUM(qty), 0), COUNT(*) FROM ` + t + ` WHERE item = ?`,
		clear:  `DELETE FROM ` + t + ` WHERE item = ?`,
		insert: `INSERT INTO ` + t + ` (item, stripe, qty) VALUES (?, ?, ?)`,
	}
}
