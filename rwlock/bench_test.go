package rwlock_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
)

// BenchmarkLockRelease: an uncontended read hold and write hold (N = 8
// reader rows) taken and given back, beside one row's take and release by
// hand, in the same run. A read is two row takes (gate, reader row), a
// write 1 + N.
func BenchmarkLockRelease(b *testing.B) {
	for _, d := range testdb.Dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			for _, mode := range []string{"read", "write"} {
				b.Run(mode, func(b *testing.B) {
					rw, key := newRW(b, db), locktest.Key(b)
					lock := rw.RLock
					if mode == "write" {
						lock = rw.Lock
					}
					for b.Loop() {
						l, err := lock(ctx, key)
						if err != nil {
							b.Fatal(err)
						}
						if err := l.Release(ctx); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			b.Run("raw", func(b *testing.B) {
				locktest.BenchRawTakeFree(b, db.DB, d, rwlock.DefaultTable, locktest.Key(b), nil)
			})
		})
	}
}
