package fence

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock"
)

func init() {
	// The MySQL path runs the same statements: none is MariaDB's own.
	register(sqllock.MariaDB, newMySQL)
	register(sqllock.MySQL, newMySQL)
}

func newMySQL(t string) store {
	{
		return mysqlStore{
			// ON DUPLICATE KEY UPDATE has no WHERE: GREATEST leaves a larger
			// recorded token in place, and the affected-row count or the
			// locked row tells the outcome.
			checkQuery: `INSERT INTO ` + t + ` (resource, last_token) VALUES (?, ?)
ON DUPLICATE KEY UPDATE last_token = GREATEST(last_token, VALUES(last_token))`,
			lastQuery:   `SELECT last_token FROM ` + t + ` WHERE resource = ?`,
			lockedQuery: `SELECT last_token FROM ` + t + ` WHERE resource = ? FOR UPDATE`,
			// varbinary: resource names compare byte for byte, not by a
			// collation that ignores case and trailing spaces.
			ddl: `CREATE TABLE ` + t + ` (
    resource   varbinary(255) NOT NULL PRIMARY KEY,
    last_token bigint         NOT NULL
) ENGINE=InnoDB;`,
		}
	}
}

// mysqlStore reads a check's outcome from the affected-row count: 2 when
// an existing row was raised to the token, and otherwise from the row the
// upsert locked.
type mysqlStore struct {
	checkQuery, lastQuery, lockedQuery, ddl string
}

func (s mysqlStore) check(ctx context.Context, q sqllock.Querier, resource string, token int64) error {
	n, err := rowsAffected(ctx, q, s.checkQuery, resource, token)
	if err != nil {
		return err
	}
	if n == 2 { // an existing row, raised to token
		return nil
	}
	// Inserted (1), or left as it was (0; 1 with CLIENT_FOUND_ROWS): the
	// row, locked by the upsert, says which.
	last, found, err := queryInt(ctx, q, s.lockedQuery, resource)
	switch {
	case err != nil:
		return err
	case !found:
		return sql.ErrNoRows
	case last == token:
		return nil
	}
	return stale(resource, token, last)
}

func (s mysqlStore) last(ctx context.Context, q sqllock.Querier, resource string) (int64, bool, error) {
	return queryInt(ctx, q, s.lastQuery, resource)
}

func (s mysqlStore) schema() string { return s.ddl }
