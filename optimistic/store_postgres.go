package optimistic

import "github.com/sqllock/sqllock"

func init() {
	register(sqllock.Postgres, postgresStore{syntax{dialect: sqllock.Postgres, mark: "$", numbered: true}})
}

// postgresStore: double-quoted names, $n parameters.
type postgresStore struct{ syntax }

// A re-stamp draws its version in the SET clause, which runs under the row
// lock: a later stamp of a key always gets a larger token, even if another
// statement drew from the sequence earlier and committed later.
func (postgresStore) versions(t string) versionStore {
	return versionSQL{
		stampQuery: `INSERT INTO ` + t + ` AS t (lock_key, version) VALUES ($1, sqllock_next_token())
ON CONFLICT (lock_key) DO UPDATE SET version = sqllock_next_token() RETURNING t.version`,
		releaseQuery: `UPDATE ` + t + ` SET version = -version WHERE lock_key = $1 AND version = $2`,
		readQuery:    `SELECT version FROM ` + t + ` WHERE lock_key = $1`,
	}
}

func (postgresStore) counterSchema(t string) string {
	return `CREATE TABLE ` + t + ` (item varchar(255) NOT NULL, stripe integer NOT NULL, qty bigint NOT NULL, PRIMARY KEY (item, stripe))`
}

func (postgresStore) counter(t string) counterQueries {
	return counterQueries{
		take:   `UPDATE ` + t + ` SET qty = qty - 1 WHERE item = $1 AND stripe = $2 AND qty > 0`,
		total:  `SELECT COALESCE(SUM(qty), 0) FROM ` + t + ` WHERE item = $1`,
		left:   `SELECT COALESCE(SUM(qty), 0), COUNT(*) FROM ` + t + ` WHERE item = $1`,
		clear:  `DELETE FROM ` + t + ` WHERE item = $1`,
		insert: `INSERT INTO ` + t + ` (item, stripe, qty) VALUES ($1, $2, $3)`,
	}
}
