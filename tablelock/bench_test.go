package tablelock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// rawStatements are the statements tablelock runs for an uncontended
// Acquire+Release, written out by hand: the floor to compare against.
var rawStatements = map[sqllock.Dialect][2]string{
	// A free row is taken by an update (rawRow inserts the row first).
	sqllock.Postgres: {
		`UPDATE sqllock_locks SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = $2, host = 'raw',
	acquired_at = now(), expires_at = now() + interval '30 seconds'
WHERE lock_key = $1 AND expires_at <= now() RETURNING token`,
		`UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = now()
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc WHERE lock_key = $1 AND owner = $2 AND token = $3`,
	},
	// On MariaDB its token comes back as LAST_INSERT_ID.
	sqllock.MariaDB: {
		`UPDATE sqllock_locks SET token = LAST_INSERT_ID(NEXTVAL(sqllock_fence_seq)), hold_count = 1,
	acquired_at = UTC_TIMESTAMP(6), host = 'raw', owner = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND
WHERE lock_key = ? AND expires_at <= UTC_TIMESTAMP(6)`,
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

// rawRow is the free row the raw take updates, where it updates.
var rawRow = map[sqllock.Dialect]string{
	sqllock.Postgres: `INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES ($1, '', 'raw', 0, 0, now(), now())`,
	sqllock.MariaDB: `INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, '', 'raw', 0, 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
}

// BenchmarkAcquireRelease: uncontended Acquire+Release through tablelock
// beside the same two statements run by hand (prepared once, as a careful
// hand-written version would be), in the same run.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite} {
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
				if q, ok := rawRow[d]; ok {
					if _, err := db.ExecContext(ctx, q, key); err != nil {
						b.Fatal(err)
					}
				}
				for b.Loop() {
					var token int64
					switch {
					case fence != nil:
						token = rawSQLiteAcquire(b, db.DB, acq, fence, key, owner)
					case d == sqllock.MariaDB:
						token = rawMySQLAcquire(b, acq, key, owner)
					default:
						if err := acq.QueryRowContext(ctx, key, owner).Scan(&token); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := rel.ExecContext(ctx, key, owner, token); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// rawMySQLAcquire takes key's free row and returns its token.
func rawMySQLAcquire(b *testing.B, acq *sql.Stmt, key, owner string) int64 {
	res, err := acq.Exec(owner, key)
	if err != nil {
		b.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		b.Fatalf("raw take: %d rows, %v", n, err)
	}
	token, err := res.LastInsertId()
	if err != nil {
		b.Fatal(err)
	}
	return token
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
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite} {
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
		sqllock.MariaDB:  `UPDATE sqllock_locks SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE) WHERE lock_key = ? AND owner = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
		sqllock.SQLite:   `UPDATE sqllock_locks SET expires_at = MAX(expires_at, ` + sqliteNow + ` + 60000000) WHERE lock_key = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ` + sqliteNow,
	}
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite} {
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

// BenchmarkHotKey: 8 clients, each a pool and a Locker of its own (as 8
// processes would be), take and give back one key in a loop, beside a bare
// lock table (INSERT ... ON CONFLICT DO NOTHING, then DELETE, a refused
// client retrying after 1ms) in the same run. One op is one handoff; on
// PostgreSQL it also reports the commits each costs, from
// pg_stat_database: every waiter woken for one winner shows there.
func BenchmarkHotKey(b *testing.B) {
	const clients = 8
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		b.Run(d.String(), func(b *testing.B) {
			ctx := context.Background()
			b.Run("sqllock", func(b *testing.B) {
				var ls []*tablelock.Locker
				for range clients {
					ls = append(ls, newLocker(b, testdb.Fresh(b, d, 0)))
				}
				key := locktest.Key(b)
				hotKey(b, d, clients, func(i int) error {
					lease, err := ls[i].Acquire(ctx, key)
					if err != nil {
						return err
					}
					return lease.Release(ctx)
				})
			})
			b.Run("raw", func(b *testing.B) {
				db := testdb.Open(b, d)
				table := fmt.Sprintf("tl_hot_%x", rand.Uint64())
				if _, err := db.Exec("CREATE TABLE " + table + " (lock_key varchar(255) NOT NULL PRIMARY KEY)"); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Exec("DROP TABLE " + table) })
				take := "INSERT INTO " + table + " (lock_key) VALUES ($1) ON CONFLICT DO NOTHING"
				free := "DELETE FROM " + table + " WHERE lock_key = $1"
				if d == sqllock.MariaDB {
					take = "INSERT IGNORE INTO " + table + " (lock_key) VALUES (?)"
					free = "DELETE FROM " + table + " WHERE lock_key = ?"
				}
				var pools []*testdb.DB
				for range clients {
					pools = append(pools, testdb.Fresh(b, d, 0))
				}
				key := locktest.Key(b)
				hotKey(b, d, clients, func(i int) error {
					for {
						r, err := pools[i].ExecContext(ctx, take, key)
						if err != nil && !dberr.IsDeadlock(err) { // MariaDB's gap locks: a refusal
							return err
						}
						if err == nil {
							if n, _ := r.RowsAffected(); n == 1 {
								break
							}
						}
						time.Sleep(time.Millisecond)
					}
					for {
						_, err := pools[i].ExecContext(ctx, free, key)
						if !dberr.IsDeadlock(err) {
							return err
						}
					}
				})
			})
		})
	}
}

// BenchmarkIdleListeners: the hot key of BenchmarkHotKey on PostgreSQL,
// fair and not, beside 0 and 16 idle sessions that LISTEN on a channel
// nobody notifies. PostgreSQL up to 18 signals every listening session of
// the database at each commit that sent a NOTIFY, whatever its channels:
// they stand for the Lockers of other processes, or other applications,
// that listen in the same database.
func BenchmarkIdleListeners(b *testing.B) {
	const clients = 8
	ctx := context.Background()
	for _, idle := range []int{0, 16} {
		for _, fair := range []bool{false, true} {
			b.Run(fmt.Sprintf("idle=%d/fair=%v", idle, fair), func(b *testing.B) {
				others := testdb.Fresh(b, sqllock.Postgres, 0)
				for range idle {
					c, err := others.Conn(ctx)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { c.Close() })
					if _, err := c.ExecContext(ctx, "LISTEN sqllock_bench_elsewhere"); err != nil {
						b.Fatal(err)
					}
				}
				var ls []*tablelock.Locker
				for range clients {
					ls = append(ls, newLocker(b, testdb.Fresh(b, sqllock.Postgres, 0), tablelock.WithFairness(fair)))
				}
				key := locktest.Key(b)
				hotKey(b, sqllock.Postgres, clients, func(i int) error {
					lease, err := ls[i].Acquire(ctx, key)
					if err != nil {
						return err
					}
					return lease.Release(ctx)
				})
			})
		}
	}
}

// hotKey runs b.N handoffs, op(client) each, spread over clients
// goroutines, and reports handoffs/s and, on PostgreSQL, commits/handoff.
func hotKey(b *testing.B, d sqllock.Dialect, clients int, op func(client int) error) {
	b.Helper()
	mon := testdb.Open(b, d)
	commits := func() int64 {
		var n int64
		if d == sqllock.Postgres {
			if err := mon.QueryRow(`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
		return n
	}
	for i := range clients { // warm each pool
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond) // backends report their counts at most once a second
	before := commits()
	var left atomic.Int64
	left.Store(int64(b.N))
	errs := make(chan error, clients)
	b.ResetTimer()
	start := time.Now()
	for i := range clients {
		go func() {
			for left.Add(-1) >= 0 {
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var err error
	for range clients {
		err = errors.Join(err, <-errs)
	}
	el := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "handoffs/s")
	if d == sqllock.Postgres {
		time.Sleep(1100 * time.Millisecond)
		b.ReportMetric(float64(commits()-before)/float64(b.N), "commits/op")
	}
}
