package recipes_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// A tablelock Locker on a pgx pool, through stdlib.OpenDBFromPool: what
// the README says it costs. Holding a key takes no pooled connection; a
// blocked Acquire takes one, the Locker's LISTEN session, for as long as
// it waits and two seconds after, and is woken by the release at once.
func TestPoolBackedLocker(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := ctxT(t)
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sdb := stdlib.OpenDBFromPool(pool)
	defer sdb.Close()
	locker, err := tablelock.New(sdb, sqllock.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()

	key := locktest.Key(t)
	held, err := locker.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	settle := func() { time.Sleep(50 * time.Millisecond) }
	settle()
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("a held key keeps %d pooled connections, want 0", n)
	}
	got := make(chan time.Time, 1)
	go func() {
		lease, err := locker.Acquire(ctx, key)
		got <- time.Now()
		if err != nil {
			t.Error(err)
			return
		}
		lease.Release(ctx)
	}()
	// conns waits until the pool has n connections out, or says how many.
	conns := func(n int32, within time.Duration) int32 {
		deadline := time.Now().Add(within)
		for {
			got := pool.Stat().AcquiredConns()
			if got == n || time.Now().After(deadline) {
				return got
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if n := conns(1, 5*time.Second); n != 1 {
		t.Errorf("a blocked Acquire keeps %d pooled connections, want 1 (the LISTEN session)", n)
	}
	time.Sleep(100 * time.Millisecond) // and no more than that one
	if n := pool.Stat().AcquiredConns(); n != 1 {
		t.Errorf("a blocked Acquire keeps %d pooled connections, want 1 (the LISTEN session)", n)
	}
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if wake := (<-got).Sub(released); wake > 2*time.Second {
		t.Errorf("the waiter took %v after the release; the TTL poll, not the NOTIFY, woke it", wake)
	} else {
		t.Logf("woken %v after the release", wake)
	}
	time.Sleep(time.Second) // the listener lingers 2s...
	if n := pool.Stat().AcquiredConns(); n != 1 {
		t.Errorf("a second after the wait the Locker keeps %d pooled connections, want 1 (the lingering listener)", n)
	}
	if n := conns(0, 10*time.Second); n != 0 { // ...then gives it back
		t.Errorf("after the wait the Locker keeps %d pooled connections, want 0", n)
	}
}
