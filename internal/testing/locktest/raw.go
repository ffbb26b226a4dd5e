package locktest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/identity"
)

const sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

// rawTake and rawFree are a lock-table row's uncontended take (with a new
// token) and release, written out by hand for table: the floor the
// benchmarks of the primitives built on the lock table compare against.
func rawTake(d sqllock.Dialect, table string) (take, free, fence string) {
	switch d {
	case sqllock.Postgres:
		return `INSERT INTO ` + table + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES ($1, $2, 'raw', 1, nextval('sqllock_fence_seq'), now(), now() + interval '30 seconds')
ON CONFLICT (lock_key) DO UPDATE SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = EXCLUDED.owner,
	acquired_at = now(), expires_at = EXCLUDED.expires_at
WHERE t.expires_at <= now() RETURNING t.token`,
			`UPDATE ` + table + ` SET hold_count = 0, owner = '', expires_at = now() WHERE lock_key = $1 AND owner = $2 AND token = $3`, ""
	case sqllock.MariaDB:
		return `INSERT INTO ` + table + ` (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, 'raw', 1, NEXTVAL(sqllock_fence_seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), NEXTVAL(sqllock_fence_seq), token),
	owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)
RETURNING token`,
			`UPDATE ` + table + ` SET hold_count = 0, owner = '', expires_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND owner = ? AND token = ?`, ""
	case sqllock.MySQL:
		// No RETURNING: the token comes back through LAST_INSERT_ID, as the
		// MySQL path's own take reads it (BenchRawTakeFree).
		return `INSERT INTO ` + table + ` (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, 'raw', 1, LAST_INSERT_ID(sqllock_next_token()), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(sqllock_next_token()), token),
	owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)`,
			`UPDATE ` + table + ` SET hold_count = 0, owner = '', expires_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND owner = ? AND token = ?`, ""
	}
	return `INSERT INTO ` + table + ` AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, 'raw', 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), ` + sqliteNow + `, ` + sqliteNow + ` + 30000000)
ON CONFLICT (lock_key) DO UPDATE SET token = excluded.token, hold_count = 1, owner = excluded.owner,
	acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
WHERE t.expires_at <= ` + sqliteNow + ` RETURNING token`,
		`UPDATE ` + table + ` SET hold_count = 0, owner = '', expires_at = ` + sqliteNow + ` WHERE lock_key = ?1 AND owner = ?2 AND token = ?3`,
		`UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1`
}

// BenchRawTakeFree runs the hand-written take and release of key in table
// once per iteration, prepared once, in a transaction with the fence bump
// on SQLite as tablelock does; between take and release it runs between
// (nil: nothing) with the token.
func BenchRawTakeFree(b *testing.B, db *sql.DB, d sqllock.Dialect, table, key string, between func(token int64)) {
	ctx := context.Background()
	take, free, fence := rawTake(d, table)
	acq, err := db.PrepareContext(ctx, take)
	if err != nil {
		b.Fatal(err)
	}
	defer acq.Close()
	rel, err := db.PrepareContext(ctx, free)
	if err != nil {
		b.Fatal(err)
	}
	defer rel.Close()
	var fst *sql.Stmt
	if fence != "" {
		if fst, err = db.PrepareContext(ctx, fence); err != nil {
			b.Fatal(err)
		}
		defer fst.Close()
	}
	owner := identity.NewOwner()
	for b.Loop() {
		var token int64
		if d == sqllock.MySQL {
			res, err := acq.ExecContext(ctx, key, owner)
			if err != nil {
				b.Fatal(err)
			}
			if token, err = res.LastInsertId(); err != nil {
				b.Fatal(err)
			}
		} else if fst == nil {
			if err := acq.QueryRowContext(ctx, key, owner).Scan(&token); err != nil {
				b.Fatal(err)
			}
		} else {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := tx.StmtContext(ctx, acq).QueryRowContext(ctx, key, owner).Scan(&token); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.StmtContext(ctx, fst).ExecContext(ctx, token); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if between != nil {
			between(token)
		}
		if _, err := rel.ExecContext(ctx, key, owner, token); err != nil {
			b.Fatal(err)
		}
	}
}
