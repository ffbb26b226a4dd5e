package semaphore_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/semaphore"
)

// BenchmarkAcquireRelease: an uncontended permit (N = 3) taken and given
// back, beside the same row's take and release by hand, in the same run.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, d := range testdb.Dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			ctx := context.Background()
			b.Run("sqllock", func(b *testing.B) {
				sem, key := newSem(b, db), locktest.Key(b)
				for b.Loop() {
					p, err := sem.Acquire(ctx, key, 3)
					if err != nil {
						b.Fatal(err)
					}
					if err := p.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("raw", func(b *testing.B) {
				locktest.BenchRawTakeFree(b, db.DB, d, semaphore.DefaultTable, locktest.Key(b)+"#0", nil)
			})
		})
	}
}

// oneLocker serves a semaphore of one permit as a Locker, for the handoff
// benchmark.
type oneLocker struct{ s *semaphore.Semaphore }

func (o oneLocker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return o.s.Acquire(ctx, key, 1)
}

func (o oneLocker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return o.s.TryAcquire(ctx, key, 1)
}

// BenchmarkHandoff: a released permit reaching a waiter of another
// Semaphore (as in another process); p50 and p99.
func BenchmarkHandoff(b *testing.B) {
	for _, d := range testdb.Dialects {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			locktest.BenchHandoff(b, oneLocker{newSem(b, db)}, oneLocker{newSem(b, db)})
		})
	}
}
