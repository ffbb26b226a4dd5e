package optimistic

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

func init() {
	register(sqllock.SQLite, sqliteStore{syntax{dialect: sqllock.SQLite, mark: "?", numbered: true}})
}

// sqliteStore: backquoted names, ?n parameters. Not double quotes: SQLite
// reads a double-quoted name that matches no column as a string literal,
// so a misspelt version column would compare a constant and report a
// conflict forever instead of failing.
type sqliteStore struct{ syntax }

func (sqliteStore) versions(t string) versionStore {
	return sqliteVersions{
		versionSQL: versionSQL{
			releaseQuery: `UPDATE ` + t + ` SET version = -version WHERE lock_key = ?1 AND version = ?2`,
			readQuery:    `SELECT version FROM ` + t + ` WHERE lock_key = ?1`,
		},
		fenceQuery: `UPDATE sqllock_fence SET value = value + 1 WHERE id = 1 RETURNING value`,
		putQuery: `INSERT INTO ` + t + ` (lock_key, version) VALUES (?1, ?2)
ON CONFLICT (lock_key) DO UPDATE SET version = excluded.version`,
	}
}

// sqliteVersions stamps in two statements: SQLite has no sequence, so the
// version is the fence row's next value.
type sqliteVersions struct {
	versionSQL        // release and read
	fenceQuery string // bump the fence row, returning the new value
	putQuery   string // key, version
}

// stamp bumps the fence row and writes the version in one transaction:
// one writer at a time, so nobody sees one without the other.
func (s sqliteVersions) stamp(ctx context.Context, _ *stmtcache.Cache, db *sql.DB, key string) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var v int64
	if err := tx.QueryRowContext(ctx, s.fenceQuery).Scan(&v); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, s.putQuery, key, v); err != nil {
		return 0, err
	}
	return v, tx.Commit()
}

func (sqliteStore) counterSchema(t string) string {
	return `CREATE TABLE ` + t + ` (item TEXT NOT NULL, stripe INTEGER NOT NULL, qty INTEGER NOT NULL, PRIMARY KEY (item, stripe))`
}

func (sqliteStore) counter(t string) counterQueries {
	return counterQueries{
		take:   `UPDATE ` + t + ` SET qty = qty - 1 WHERE item = ?1 AND stripe = ?2 AND qty > 0`,
		total:  `SELECT COALESCE(SUM(qty), 0) FROM ` + t + ` WHERE item = ?1`,
		left:   `SELECT COALESCE(SUM(qty), 0), COUNT(*) FROM ` + t + ` WHERE item = ?1`,
		clear:  `DELETE FROM ` + t + ` WHERE item = ?1`,
		insert: `INSERT INTO ` + t + ` (item, stripe, qty) VALUES (?1, ?2, ?3)`,
	}
}
