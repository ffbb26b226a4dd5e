package fence

import "github.com/sqllock/sqllock"

func init() {
	register(sqllock.Postgres, func(t string) store {
		return upsertStore{
			checkQuery: `INSERT INTO ` + t + ` AS f (resource, last_token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token
WHERE f.last_token <= EXCLUDED.last_token`,
			lastQuery: `SELECT last_token FROM ` + t + ` WHERE resource = $1`,
			ddl: `CREATE TABLE ` + t + ` (
    resource   varchar(255) NOT NULL PRIMARY KEY,
    last_token bigint       NOT NULL
);`,
		}
	})
}
