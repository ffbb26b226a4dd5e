package fence

import "github.com/sqllock/sqllock"

func init() {
	register(sqllock.SQLite, func(t string) store {
		return upsertStore{
			checkQuery: `INSERT INTO ` + t + ` (resource, last_token) VALUES (?1, ?2)
ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token
WHERE last_token <= excluded.last_token`,
			lastQuery: `SELECT last_token FROM ` + t + ` WHERE resource = ?1`,
			ddl: `CREATE TABLE ` + t + ` (
    resource   TEXT    NOT NULL PRIMARY KEY,
    last_token INTEGER NOT NULL
);`,
		}
	})
}
