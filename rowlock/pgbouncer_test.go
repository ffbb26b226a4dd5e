package rowlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestPgBouncer: through PgBouncer in transaction mode (one server session
// for every client), a lease is one transaction that the proxy keeps on
// its server session: a direct client is refused the key while it is held,
// and concurrent holders through the proxy never overlap. Without
// WithTransactionPooler the prepared statements collide ("prepared
// statement ... already exists"). The conformance suite does not run here:
// with a pool of one, a held lease takes the proxy's only server session,
// so a second client's TryAcquire waits in the proxy's queue instead of
// being refused.
func TestPgBouncer(t *testing.T) {
	pooled := testdb.PgBouncer(t)
	direct := testdb.Open(t, sqllock.Postgres)
	ctx := ctxT(t)
	l := newLocker(t, pooled, rowlock.WithTransactionPooler())
	other := newLocker(t, direct)

	t.Run("ExcludesDirectClient", func(t *testing.T) {
		key := locktest.Key(t)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var one int
		if err := lease.(*rowlock.Lease).Tx().QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("work in the lease's transaction: %v", err)
		}
		if l2, err := other.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			if err == nil {
				l2.Release(ctx)
			}
			t.Fatalf("direct TryAcquire while held through the proxy = %v, want ErrNotAcquired", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l2, err := other.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("direct TryAcquire after Release: %v", err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MutualExclusion", func(t *testing.T) {
		key := locktest.Key(t)
		const workers, rounds = 4, 10
		var mu sync.Mutex
		inside, total := 0, 0
		var wg sync.WaitGroup
		errs := make(chan error, workers*rounds)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					errs <- sqllock.Do(ctx, l, key, func(ctx context.Context) error {
						mu.Lock()
						inside++
						n := inside
						mu.Unlock()
						tx, _ := rowlock.TxFrom(ctx)
						var one int
						err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one)
						mu.Lock()
						inside--
						total++
						mu.Unlock()
						if n != 1 {
							return errors.New("two holders overlapped")
						}
						return err
					})
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if total != workers*rounds {
			t.Errorf("%d sections ran, want %d", total, workers*rounds)
		}
	})
}
