package advisory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// During a move between the two MySQL-family paths (a rolling restart
// with sqllock_dialect changed, or a server turned into a Galera node)
// replicas on both hold the same keys: a key held on one path is refused
// on the other, in both directions, for a key that keeps its name, one
// with capitals, one past 64 bytes and one with bytes outside ASCII. Both
// ask the server for the same name.
func TestPathsExcludeEachOther(t *testing.T) {
	ctx := ctxT(t)
	db := testdb.Scratch(t, sqllock.MariaDB)
	srv, err := sqllock.DetectServer(ctx, db.DB)
	if err != nil {
		t.Fatal(err)
	}
	if !srv.MariaDB || srv.Galera {
		t.Skipf("needs MariaDB outside Galera, which runs both paths; this is %s", srv.Version)
	}
	if err := migrations.Up(ctx, db.DB, sqllock.MariaDB); err != nil {
		t.Fatal(err)
	}
	lockers := map[sqllock.Dialect]*advisory.Locker{}
	for _, d := range []sqllock.Dialect{sqllock.MariaDB, sqllock.MySQL} {
		lockers[d] = newLocker(t, &testdb.DB{DB: db.DB, Dialect: d})
	}
	keys := []string{
		"orders/42-" + strings.ToLower(t.Name()),
		"Orders/42",
		"Orders/" + strings.Repeat("x", 200),
		"Bestellung/Zoë-ü-42",
	}
	moves := []struct{ holder, other sqllock.Dialect }{
		{sqllock.MariaDB, sqllock.MySQL},
		{sqllock.MySQL, sqllock.MariaDB},
	}
	for _, key := range keys {
		for _, m := range moves {
			lease, err := lockers[m.holder].TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("%v: TryAcquire(%.20q): %v", m.holder, key, err)
			}
			if got, err := lockers[m.other].TryAcquire(ctx, key); err == nil {
				t.Errorf("key %.20q held on %v (token %d) and on %v (token %d) at once", key, m.holder, lease.Token(), m.other, got.Token())
				got.Release(ctx)
			} else if !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Errorf("%v: TryAcquire(%.20q) beside a holder on %v: %v, want ErrNotAcquired", m.other, key, m.holder, err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
