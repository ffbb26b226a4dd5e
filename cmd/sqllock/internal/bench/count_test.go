package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/lockers"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// The idle-waiter count sees every statement a Locker sends, those the
// library runs on the driver's own connection (PostgreSQL) included: a
// TryAcquire and its Release are at least two.
func TestCountingDB(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			var n atomic.Int64
			cdb, err := CountingDB(Target{Driver: db.Driver, DSN: db.DSN, Dialect: db.Dialect}, &n)
			if err != nil {
				t.Fatal(err)
			}
			defer cdb.Close()
			l, closeFn, err := lockers.Tablelock(cdb, db.Dialect, lockers.Opts{})
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			ctx := context.Background()
			lease, err := l.TryAcquire(ctx, locktest.Key(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := n.Load(); got < 2 {
				t.Errorf("%d statements counted for a TryAcquire and its Release, want at least 2", got)
			}
		})
	}
}
