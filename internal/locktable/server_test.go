package locktable_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// A take on PostgreSQL or SQLite asks nothing of the server: the Table
// has no Check at all. On MariaDB the Table reads its server at its first
// take and never again, and a second Table on another handle reads its
// own.
func TestTakeProbesOnlyWhereTheDialectNeedsIt(t *testing.T) {
	ctx := context.Background()
	take := func(t *testing.T, tbl *locktable.Table) {
		t.Helper()
		key := locktest.Key(t)
		a, err := tbl.Take(ctx, locktable.Claim{Key: key, Owner: "o", Host: "h", TTL: time.Minute})
		if err != nil || !a.Won {
			t.Fatalf("Take(%q) = %+v, %v", key, a, err)
		}
		if err := tbl.Release(ctx, key, "o", a.Token, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.SQLite} {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			tbl := opener(t, db, locktable.Config{Table: "sqllock_locks"})()
			take(t, tbl)
			take(t, tbl)
			if c := tbl.ServerCheck(); c != nil || c.Probes() != 0 {
				t.Fatalf("a %v Table keeps a server Check (%d probes); want none", d, c.Probes())
			}
		})
	}
	t.Run("mysql family", func(t *testing.T) {
		d := testdb.MySQL()
		a := opener(t, testdb.Open(t, d), locktable.Config{Table: "sqllock_locks"})()
		b := opener(t, testdb.Fresh(t, d, 0), locktable.Config{Table: "sqllock_locks"})()
		if a.ServerCheck() == nil || b.ServerCheck() == nil {
			t.Fatalf("a %v Table without a server Check", d)
		}
		if n := a.ServerCheck().Probes(); n != 0 {
			t.Fatalf("%d probes before the first take; Open must not touch the database", n)
		}
		for range 3 {
			take(t, a)
		}
		if n := a.ServerCheck().Probes(); n != 1 {
			t.Fatalf("%d probes after three takes; want the one of the first", n)
		}
		if n := b.ServerCheck().Probes(); n != 0 {
			t.Fatalf("the other handle's Table probed %d times without a take: it shares what it learns", n)
		}
		take(t, b)
		if n := b.ServerCheck().Probes(); n != 1 {
			t.Fatalf("the other handle's Table: %d probes after its take; want its own one", n)
		}
	})
}
