package tablelock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
)

// rawStatements are the statements tablelock runs for an uncontended
// Acquire+Release, written out by hand: the floor to compare against.
var rawStatements = map[sqllock.Dialect][2]string{
	sqllock.Postgres: {
		`INSERT INTO sqllock_locks AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES ($1, $2, 'raw', 1, nextval('sqllock_fence_seq'), now(), now() + interval '30 seconds')
ON CONFLICT (lock_key) DO UPDATE SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = EXCLUDED.owner,
	acquired_at = now(), expires_at = EXCLUDED.expires_at
WHERE t.expires_at <= now() RETURNING t.token`,
		`UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = now() WHERE lock_key = $1 AND owner = $2 AND token = $3`,
	},
	sqllock.MySQL: {
		`INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, 'raw', 1, NEXTVAL(sqllock_fence_seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), NEXTVAL(sqllock_fence_seq), token),
	owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)
RETURNING token`,
		`UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND owner = ? AND token = ?`,
	},
	// SQLite has no sequence: the acquire runs in a transaction with the
	// bump of the fence row (rawSQLiteFence), as tablelock's does.
	sqllock.SQLite: {
		`INSERT INTO sqllock_locks AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, 'raw', 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), ` + sqliteNow + `, ` + sqliteNow + ` + 30000000)
ON CONFLICT (lock_key) DO UPDATE SET token = excluded.token, hold_count = 1, owner = excluded.owner,
	acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
WHERE t.expires_at <= ` + sqliteNow + ` RETURNING token`,
		`UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = ` + sqliteNow + ` WHERE lock_key = ?1 AND owner = ?2 AND token = ?3`,
	},
}

const (
	sqliteNow      = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`
	rawSQLiteFence = `UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1`
)

// BenchmarkAcquireRelease: uncontended Acquire+Release through tablelock
// beside the same two statements run by hand (prepared once, as a careful
// hand-written version would be), in the same run.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.SQLite} {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			b.Run("sqllock", func(b *testing.B) {
				l := newLocker(b, db)
				key := locktest.Key(b)
				for b.Loop() {
					lease, err := l.Acquire(ctx, key)
					if err != nil {
						b.Fatal(err)
					}
					if err := lease.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			raw, ok := rawStatements[d]
			if !ok {
				return
			}
			b.Run("raw", func(b *testing.B) {
				acq, err := db.PrepareContext(ctx, raw[0])
				if err != nil {
					b.Fatal(err)
				}
				defer acq.Close()
				rel, err := db.PrepareContext(ctx, raw[1])
				if err != nil {
					b.Fatal(err)
				}
				defer rel.Close()
				var fence *sql.Stmt
				if d == sqllock.SQLite {
					if fence, err = db.PrepareContext(ctx, rawSQLiteFence); err != nil {
						b.Fatal(err)
					}
					defer fence.Close()
				}
				key, owner := locktest.Key(b), identity.NewOwner()
				for b.Loop() {
					var token int64
					if fence != nil {
						token = rawSQLiteAcquire(b, db.DB, acq, fence, key, owner)
					} else if err := acq.QueryRowContext(ctx, key, owner).Scan(&token); err != nil {
						b.Fatal(err)
					}
					if _, err := rel.ExecContext(ctx, key, owner, token); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// rawSQLiteAcquire takes key and bumps the fence row in one transaction.
func rawSQLiteAcquire(b *testing.B, db *sql.DB, acq, fence *sql.Stmt, key, owner string) int64 {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	var token int64
	if err := tx.StmtContext(ctx, acq).QueryRowContext(ctx, key, owner).Scan(&token); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.StmtContext(ctx, fence).ExecContext(ctx, token); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return token
}

// BenchmarkHandoff measures release → a blocked waiter in another Locker
// (its own listener, as in another process) returns. It reports p50 and p99.
func BenchmarkHandoff(b *testing.B) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.SQLite} {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			locktest.BenchHandoff(b, newLocker(b, db), newLocker(b, db))
		})
	}
}

// BenchmarkExtend: Lease.Extend of a held lease beside the renewal
// statement it runs, by hand, in the same run.
func BenchmarkExtend(b *testing.B) {
	raw := map[sqllock.Dialect]string{
		sqllock.Postgres: `UPDATE sqllock_locks SET expires_at = GREATEST(expires_at, now() + interval '1 minute') WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()`,
		sqllock.MySQL:    `UPDATE sqllock_locks SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE) WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		sqllock.SQLite:   `UPDATE sqllock_locks SET expires_at = MAX(expires_at, ` + sqliteNow + ` + 60000000) WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ` + sqliteNow,
	}
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.SQLite} {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			l := newLocker(b, db)
			lease, err := l.Acquire(sqllock.WithOwner(ctx, "bench-extend"), locktest.Key(b))
			if err != nil {
				b.Fatal(err)
			}
			defer lease.Release(ctx)
			b.Run("sqllock", func(b *testing.B) {
				for b.Loop() {
					if err := sqllock.Extend(ctx, lease, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("raw", func(b *testing.B) {
				st, err := db.PrepareContext(ctx, raw[d])
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				for b.Loop() {
					if _, err := st.ExecContext(ctx, lease.Key(), "bench-extend", lease.Token()); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
