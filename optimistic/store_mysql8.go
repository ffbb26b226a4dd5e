package optimistic

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

func init() {
	register(sqllock.MySQL, mysqlCommonStore{mysqlStore{syntax{dialect: sqllock.MariaDB, mark: "?"}}})
}

// mysqlCommonStore is the MySQL path (MySQL 8, and MariaDB when chosen):
// MariaDB's statements, except that the stamp draws its version with
// sqllock_next_token() (migration 00010) and hands it back through
// LAST_INSERT_ID, as there is no RETURNING.
type mysqlCommonStore struct{ mysqlStore }

func (s mysqlCommonStore) versions(t string) versionStore {
	v := s.mysqlStore.versions(t).(versionSQL)
	v.stampQuery = `INSERT INTO ` + t + ` (lock_key, version) VALUES (?, LAST_INSERT_ID(sqllock_next_token()))
ON DUPLICATE KEY UPDATE version = LAST_INSERT_ID(sqllock_next_token())`
	return lastInsertStamp{v}
}

// lastInsertStamp reads the stamped version from the OK packet's last
// insert id: one round trip, as with RETURNING.
type lastInsertStamp struct{ versionSQL }

func (s lastInsertStamp) stamp(ctx context.Context, c *stmtcache.Cache, db *sql.DB, key string) (int64, error) {
	res, err := c.Exec(ctx, db, s.stampQuery, key)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}
