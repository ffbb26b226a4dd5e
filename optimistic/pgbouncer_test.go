package optimistic_test

import (
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// TestPgBouncer runs the conformance suite through PgBouncer in transaction
// mode, where a statement prepared on one client's turn of the shared
// server session collides with another client's of the same name.
func TestPgBouncer(t *testing.T) {
	db := testdb.PgBouncer(t)
	locktest.Run(t, locktest.Target{
		DB: db,
		New: func(t testing.TB) sqllock.Locker {
			l, err := optimistic.New(db.DB, db.Dialect, optimistic.WithTransactionPooler())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
		Exclusive: false,
	})
}

// TestPgBouncerTable: Modify through PgBouncer in transaction mode, from two
// pools at once (two processes' worth of clients on the proxy's shared
// server sessions), counts every increment with WithTableTransactionPooler.
// Without it the pools' prepared statements collide on a server session
// ("prepared statement ... already exists") or are missing on the next
// turn ("does not exist").
func TestPgBouncerTable(t *testing.T) {
	db := testdb.PgBouncer(t)
	ctx := ctxT(t)
	name := stockTable(t, db, 0)
	const pools, workers, each = 2, 4, 20
	var wg sync.WaitGroup
	for range pools {
		p, err := sql.Open("pgx", db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		tb := newTable(t, db, name, optimistic.WithTableTransactionPooler())
		for range workers {
			wg.Go(func() {
				for range each {
					_, err := optimistic.Modify(ctx, p, tb, 1, optimistic.LimitAttempts(optimistic.ExponentialBackoff(100*time.Microsecond, 20*time.Millisecond), 1000), func(it *item) error {
						it.Qty++
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if qty, ver := readStock(t, db, name); qty != pools*workers*each || ver != pools*workers*each+1 {
		t.Fatalf("qty %d version %d, want %d and %d", qty, ver, pools*workers*each, pools*workers*each+1)
	}
}
