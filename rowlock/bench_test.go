package rowlock_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// rawLock is the hand-written floor: BEGIN; SELECT ... FOR UPDATE; COMMIT
// on an existing row, the statement prepared once.
var rawLock = map[sqllock.Dialect]string{
	sqllock.Postgres: "SELECT 1 FROM sqllock_rows WHERE lock_key = $1 FOR UPDATE",
	sqllock.MariaDB:  "SELECT 1 FROM sqllock_rows WHERE lock_key = ? FOR UPDATE", sqllock.MySQL: "SELECT 1 FROM sqllock_rows WHERE lock_key = ? FOR UPDATE",
}

func benchServers(b *testing.B, fn func(b *testing.B, db *testdb.DB)) {
	for _, d := range servers {
		b.Run(d.String(), func(b *testing.B) { fn(b, testdb.Open(b, d)) })
	}
}

// ours is one Acquire+Release through rowlock.
func ours(b *testing.B, ctx context.Context, l *rowlock.Locker, key string) {
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkShared: uncontended AcquireShared+Release beside the raw SQL
// of the same shared row lock (FOR SHARE, LOCK IN SHARE MODE), in the
// same run.
func BenchmarkShared(b *testing.B) {
	raw := map[bool]string{true: "SELECT 1 FROM sqllock_rows WHERE lock_key = $1 FOR SHARE",
		false: "SELECT 1 FROM sqllock_rows WHERE lock_key = ? LOCK IN SHARE MODE"}
	benchServers(b, func(b *testing.B, db *testdb.DB) {
		ctx := context.Background()
		key := locktest.Key(b)
		l := newLocker(b, db)
		ours(b, ctx, l, key) // the row exists for both variants
		b.Run("sqllock", func(b *testing.B) {
			for b.Loop() {
				lease, err := l.AcquireShared(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("raw", func(b *testing.B) {
			st, err := db.PrepareContext(ctx, raw[db.Dialect == sqllock.Postgres])
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for b.Loop() {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				var one int
				if err := tx.StmtContext(ctx, st).QueryRowContext(ctx, key).Scan(&one); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkAcquireRelease: uncontended Acquire+Release beside the raw SQL of
// the same row lock, in the same run.
func BenchmarkAcquireRelease(b *testing.B) {
	benchServers(b, func(b *testing.B, db *testdb.DB) {
		ctx := context.Background()
		key := locktest.Key(b)
		l := newLocker(b, db)
		ours(b, ctx, l, key) // the row exists for both variants
		b.Run("sqllock", func(b *testing.B) {
			for b.Loop() {
				ours(b, ctx, l, key)
			}
		})
		b.Run("raw", func(b *testing.B) {
			st, err := db.PrepareContext(ctx, rawLock[db.Dialect])
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for b.Loop() {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				var one int
				if err := tx.StmtContext(ctx, st).QueryRowContext(ctx, key).Scan(&one); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkHotKey: 8 clients take turns on one key.
func BenchmarkHotKey(b *testing.B) {
	benchServers(b, func(b *testing.B, db *testdb.DB) {
		ctx := context.Background()
		key := locktest.Key(b)
		l := newLocker(b, db)
		ours(b, ctx, l, key)
		b.Run("sqllock", func(b *testing.B) {
			b.SetParallelism(4) // 8 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ours(b, ctx, l, key)
				}
			})
		})
		b.Run("raw", func(b *testing.B) {
			st, err := db.PrepareContext(ctx, rawLock[db.Dialect])
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					var one int
					if err := tx.StmtContext(ctx, st).QueryRowContext(ctx, key).Scan(&one); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	})
}
