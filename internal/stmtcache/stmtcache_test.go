package stmtcache_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyNoLeaks(m) }

// A statement in use when the cache closes stays usable until put back,
// and closes then; a Get after Close hands out a statement of its own that
// put closes. Counted on one MariaDB session.
func TestCloseWaitsForUsers(t *testing.T) {
	db := testdb.Fresh(t, sqllock.MySQL, 1)
	ctx := context.Background()
	base, _ := testdb.SessionStatements(t, db.DB)
	open := func() int64 {
		t.Helper()
		n, _ := testdb.SessionStatements(t, db.DB)
		return n - base
	}
	c := stmtcache.New(db.DB)
	sts, put, err := c.GetAll(ctx, "SELECT ?", "SELECT ? + 1")
	if err != nil {
		t.Fatal(err)
	}
	again, putAgain, err := c.Get(ctx, "SELECT ?")
	if err != nil {
		t.Fatal(err)
	}
	if again != sts[0] {
		t.Error("a second Get prepared the statement again")
	}
	putAgain()
	if n := open(); n != 2 {
		t.Fatalf("%d statements open, want 2", n)
	}
	c.Close()
	var v int
	if err := sts[1].QueryRowContext(ctx, 1).Scan(&v); err != nil || v != 2 {
		t.Fatalf("a statement in use when the cache closed: %v, %v", v, err)
	}
	if n := open(); n != 2 {
		t.Fatalf("%d statements open while one is in use, want 2", n)
	}
	put()
	put() // a second put changes nothing
	if n := open(); n != 0 {
		t.Fatalf("%d statements open after Close and the last put, want 0", n)
	}

	late, putLate, err := c.Get(ctx, "SELECT ?")
	if err != nil {
		t.Fatal(err)
	}
	if err := late.QueryRowContext(ctx, 5).Scan(&v); err != nil || v != 5 {
		t.Fatalf("a Get after Close: %v, %v", v, err)
	}
	putLate()
	if n := open(); n != 0 {
		t.Fatalf("%d statements open after a Get after Close was put back, want 0", n)
	}
	c.Close() // again: nothing to do
}
