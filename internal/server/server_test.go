package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// Off the MySQL family there is no Check, and a nil Check asks nothing:
// a PostgreSQL or SQLite take never reaches a server probe.
func TestNoCheckOffMySQL(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.SQLite} {
		c := server.New(nil, d, true)
		if c != nil {
			t.Fatalf("New(%v) = %p; want nil", d, c)
		}
		if err := c.Check(context.Background()); err != nil || c.Probes() != 0 {
			t.Fatalf("a nil Check = %v after %d probes; want nil, none", err, c.Probes())
		}
	}
}

// Two handles, two Checks: each reads its own server once, and what one
// learned is not the other's. A database never migrated is refused on its
// handle, again at each call (a failure is not kept), without reading the
// server twice; once migrated, the same Check passes.
func TestChecksKeepTheirOwnFacts(t *testing.T) {
	ctx := context.Background()
	migrated := testdb.Open(t, testdb.MySQL())
	bare := testdb.Scratch(t, sqllock.MySQL)
	a := server.New(migrated.DB, sqllock.MySQL, false)
	b := server.New(bare.DB, sqllock.MySQL, false)
	for range 3 {
		if err := a.Check(ctx); err != nil {
			t.Fatalf("Check on the migrated database: %v", err)
		}
	}
	for range 2 {
		if err := b.Check(ctx); err == nil || !strings.Contains(err.Error(), "migrations.Up") {
			t.Fatalf("Check on a database never migrated = %v; want an error saying to run migrations.Up", err)
		}
	}
	if pa, pb := a.Probes(), b.Probes(); pa != 1 || pb != 1 {
		t.Fatalf("probes: %d on one handle, %d on the other; want one each", pa, pb)
	}
	if err := migrations.Up(ctx, bare.DB, sqllock.MySQL); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctx); err != nil || b.Probes() != 1 {
		t.Fatalf("Check after migrating = %v after %d probes; want nil, still one", err, b.Probes())
	}
}

// Off Galera the single-writer declaration changes nothing: both
// dialects of the family pass with it as without it.
func TestSingleWriterOffGalera(t *testing.T) {
	ctx := context.Background()
	db := testdb.Open(t, testdb.MySQL())
	if srv, err := sqllock.DetectServer(ctx, db.DB); err != nil || srv.Galera {
		t.Skipf("needs a server outside Galera: %+v, %v", srv, err)
	}
	for _, d := range []sqllock.Dialect{db.Dialect, sqllock.MySQL} {
		for _, on := range []bool{true, false} {
			if err := server.New(db.DB, d, on).Check(ctx); err != nil {
				t.Errorf("%v, single writer %v: %v", d, on, err)
			}
		}
	}
}
