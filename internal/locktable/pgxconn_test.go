package locktable_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// On PostgreSQL through pgx's stdlib, a lease's statements run on the pgx
// connection itself and prepare nothing through database/sql; through
// another driver they go through database/sql's prepared statements and
// behave the same.
func TestPostgresDriverPaths(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := context.Background()
	lease := func(t *testing.T, tbl *locktable.Table) {
		t.Helper()
		for _, free := range []bool{true, false} {
			c := locktable.Claim{Key: "k", Owner: "o", Host: "h", TTL: time.Minute, ExpectFree: free}
			a, err := tbl.Take(ctx, c)
			if err != nil || !a.Won {
				t.Fatalf("take = %+v, %v; want won", a, err)
			}
			if _, ok, err := tbl.Renew(ctx, "k", "o", a.Token, time.Minute); !ok || err != nil {
				t.Fatalf("renew = %v, %v; want renewed", ok, err)
			}
			if err := tbl.Release(ctx, "k", "o", a.Token, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("pgx", func(t *testing.T) {
		tbl := table(t, db, locktable.Config{Notify: true})
		lease(t, tbl)
		if n := tbl.Prepared(); n != 0 {
			t.Errorf("%d statements prepared through database/sql, want none", n)
		}
	})
	t.Run("other driver", func(t *testing.T) {
		odb := testdb.OpenHidden(t)
		tbl := table(t, odb, locktable.Config{Notify: true})
		lease(t, tbl)
		if n := tbl.Prepared(); n == 0 {
			t.Error("nothing prepared through database/sql: the statements did not go through it")
		}
		for _, free := range []bool{false, true} {
			takeReleaseKeep(t, odb, free)
		}
	})
}
