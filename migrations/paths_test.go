package migrations_test

import (
	"context"
	"database/sql"
	"io"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/optimistic"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// closingLocker is a strategy's Locker with its Close.
type closingLocker interface {
	sqllock.Locker
	io.Closer
}

// tokenStrategies are the strategies that draw a token on both MySQL-family
// paths.
var tokenStrategies = []struct {
	name string
	open func(*sql.DB, sqllock.Dialect) (closingLocker, error)
}{
	{"tablelock", func(db *sql.DB, d sqllock.Dialect) (closingLocker, error) { return tablelock.New(db, d) }},
	{"advisory", func(db *sql.DB, d sqllock.Dialect) (closingLocker, error) { return advisory.New(db, d) }},
	{"optimistic", func(db *sql.DB, d sqllock.Dialect) (closingLocker, error) { return optimistic.New(db, d) }},
	{"rowlock", func(db *sql.DB, d sqllock.Dialect) (closingLocker, error) { return rowlock.New(db, d) }},
}

// plainMariaDB skips the test unless db's server is MariaDB outside
// Galera, the one server that runs both paths.
func plainMariaDB(t *testing.T, db *testdb.DB) {
	t.Helper()
	srv, err := sqllock.DetectServer(context.Background(), db.DB)
	if err != nil {
		t.Fatal(err)
	}
	if !srv.MariaDB || srv.Galera {
		t.Skipf("needs MariaDB outside Galera, which runs both paths; this is %s", srv.Version)
	}
}

// rounds takes and gives back key n times on path d and returns the last
// token.
func rounds(t *testing.T, db *sql.DB, d sqllock.Dialect, open func(*sql.DB, sqllock.Dialect) (closingLocker, error), key string, n int) int64 {
	t.Helper()
	ctx := context.Background()
	l, err := open(db, d)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var last int64
	for i := range n {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("%v round %d: %v", d, i, err)
		}
		if tok := lease.Token(); tok <= last {
			t.Fatalf("%v round %d: token %d after %d", d, i, tok, last)
		}
		last = lease.Token()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// A MariaDB database moved from one path to the other, in either
// direction and however long it ran on the first, keeps its tokens
// growing: 50 rounds on one path, then the first hold on the other has a
// larger token, and so have 50 more rounds back on the first. Every
// strategy that draws tokens on both paths, each on a database of its own.
func TestTokensGrowAcrossPaths(t *testing.T) {
	moves := []struct{ from, to sqllock.Dialect }{
		{sqllock.MariaDB, sqllock.MySQL},
		{sqllock.MySQL, sqllock.MariaDB},
	}
	for _, s := range tokenStrategies {
		for _, m := range moves {
			t.Run(s.name+"/"+m.from.String()+"-to-"+m.to.String(), func(t *testing.T) {
				db := testdb.Scratch(t, sqllock.MariaDB)
				plainMariaDB(t, db)
				if err := migrations.Up(context.Background(), db.DB, sqllock.MariaDB); err != nil {
					t.Fatal(err)
				}
				key := locktest.Key(t)
				before := rounds(t, db.DB, m.from, s.open, key, 50)
				after := rounds(t, db.DB, m.to, s.open, key, 1)
				if after <= before {
					t.Fatalf("%d rounds on %v ended at token %d; the first on %v got %d", 50, m.from, before, m.to, after)
				}
				back := rounds(t, db.DB, m.from, s.open, key, 50)
				if first := back; first <= after {
					t.Fatalf("back on %v: token %d after %d on %v", m.from, first, after, m.to)
				}
			})
		}
	}
}

// A database that ran on the MySQL path before migration 00015 (its
// tickets far above the sequence) keeps its tokens growing when it moves
// to the MariaDB path after the migration.
func TestTokensGrowAcrossPathsAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.MariaDB)
	plainMariaDB(t, db)
	p, err := migrations.NewProvider(db.DB, sqllock.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	key := locktest.Key(t)
	open := tokenStrategies[0].open
	before := rounds(t, db.DB, sqllock.MySQL, open, key, 50)
	if err := migrations.Up(ctx, db.DB, sqllock.MariaDB); err != nil {
		t.Fatal(err)
	}
	if after := rounds(t, db.DB, sqllock.MariaDB, open, key, 1); after <= before {
		t.Fatalf("50 rounds on the MySQL path ended at token %d; after the upgrade the MariaDB path's first got %d", before, after)
	}
}

// A MariaDB database whose server becomes a Galera node: the function
// draws tickets there (Galera does not replicate a cached sequence), above
// every token the sequence handed out before. The session's cached answer
// to "is this a Galera node" stands in for wsrep_on, which this server
// cannot turn on.
func TestTokensGrowOnGaleraNode(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.MariaDB)
	plainMariaDB(t, db)
	if err := migrations.Up(ctx, db.DB, sqllock.MariaDB); err != nil {
		t.Fatal(err)
	}
	key := locktest.Key(t)
	before := rounds(t, db.DB, sqllock.MariaDB, tokenStrategies[0].open, key, 50)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET @sqllock_wsrep_on = TRUE"); err != nil {
		t.Fatal(err)
	}
	// LASTVAL is the session's last draw from the sequence (the pool may
	// have used the session for the rounds above): the draws below leave it.
	lastval := func() sql.NullInt64 {
		var v sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT LASTVAL(sqllock_fence_seq)").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	drawn := lastval()
	last := before
	for i := range 5 {
		var tok int64
		if err := conn.QueryRowContext(ctx, "SELECT sqllock_next_token()").Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok <= last {
			t.Fatalf("draw %d on the Galera node: token %d after %d", i, tok, last)
		}
		last = tok
	}
	if now := lastval(); now != drawn {
		t.Errorf("the session drew %d from the sequence on a Galera node (before: %v)", now.Int64, drawn)
	}
}

// Migrating down to 00010's function keeps tokens growing: the tickets
// start above the sequence again.
func TestTokensGrowAfterDown(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.MariaDB)
	plainMariaDB(t, db)
	if err := migrations.Up(ctx, db.DB, sqllock.MariaDB); err != nil {
		t.Fatal(err)
	}
	key := locktest.Key(t)
	open := tokenStrategies[0].open
	before := rounds(t, db.DB, sqllock.MariaDB, open, key, 50)
	p, err := migrations.NewProvider(db.DB, sqllock.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if after := rounds(t, db.DB, sqllock.MySQL, open, key, 1); after <= before {
		t.Fatalf("50 rounds on the MariaDB path ended at token %d; after migrating down the MySQL path's first got %d", before, after)
	}
}

// galeraDraws draws n tokens on one session as the MySQL path does on a
// Galera node (tickets, the sequence left alone; the session's cached
// answer stands in for wsrep_on) and returns the last.
func galeraDraws(t *testing.T, db *sql.DB, n int) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET @sqllock_wsrep_on = TRUE"); err != nil {
		t.Fatal(err)
	}
	// The session goes back to the pool knowing it is not a Galera node.
	defer conn.ExecContext(ctx, "SET @sqllock_wsrep_on = NULL")
	var last int64
	for i := range n {
		var tok int64
		if err := conn.QueryRowContext(ctx, "SELECT sqllock_next_token()").Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok <= last {
			t.Fatalf("draw %d on the Galera node: token %d after %d", i, tok, last)
		}
		last = tok
	}
	return last
}

// oldFunctionDraws draws n tokens as 00010's function does (a ticket
// alone): a replica of an older release on the MySQL path whose statement
// ran while 00015 was being applied, after the sequence was raised and
// before the function was replaced.
func oldFunctionDraws(t *testing.T, db *sql.DB, n int) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var last int64
	for range n {
		if _, err := conn.ExecContext(ctx, "INSERT INTO sqllock_tickets () VALUES ()"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&last); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "DELETE FROM sqllock_tickets WHERE id = ?", last); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// A server that leaves Galera, or an upgrade during which a replica of an
// older release drew tickets alone: the tickets are ahead of the sequence,
// and only a draw through sqllock_next_token() raises it. A handle on the
// MariaDB path, whose statements draw NEXTVAL alone, still starts above
// every ticket handed out before its first token. after-galera: 50 rounds
// on the MariaDB path, then 50 draws on a Galera node. after-old-release:
// 50 rounds on the MySQL path before 00015, then 50 draws of 00010's
// function once 00015 raised the sequence. Then a fresh handle on the
// MariaDB path. Every strategy, each on a database of its own.
func TestTokensGrowBackOnMariaDBPath(t *testing.T) {
	ways := []struct {
		name string
		run  func(t *testing.T, db *sql.DB, open func(*sql.DB, sqllock.Dialect) (closingLocker, error), key string) int64
	}{
		{"after-galera", func(t *testing.T, db *sql.DB, open func(*sql.DB, sqllock.Dialect) (closingLocker, error), key string) int64 {
			if err := migrations.Up(context.Background(), db, sqllock.MariaDB); err != nil {
				t.Fatal(err)
			}
			before := rounds(t, db, sqllock.MariaDB, open, key, 50)
			drawn := galeraDraws(t, db, 50)
			if drawn <= before {
				t.Fatalf("the Galera draws ended at %d, not above the MariaDB path's %d: the test shows nothing", drawn, before)
			}
			return drawn
		}},
		{"after-old-release", func(t *testing.T, db *sql.DB, open func(*sql.DB, sqllock.Dialect) (closingLocker, error), key string) int64 {
			ctx := context.Background()
			p, err := migrations.NewProvider(db, sqllock.MariaDB)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, 12); err != nil {
				t.Fatal(err)
			}
			before := rounds(t, db, sqllock.MySQL, open, key, 50)
			if err := migrations.Up(ctx, db, sqllock.MariaDB); err != nil {
				t.Fatal(err)
			}
			drawn := oldFunctionDraws(t, db, 50)
			if drawn <= before {
				t.Fatalf("the old function's draws ended at %d, not above the MySQL path's %d", drawn, before)
			}
			return drawn
		}},
	}
	for _, s := range tokenStrategies {
		for _, w := range ways {
			t.Run(s.name+"/"+w.name, func(t *testing.T) {
				db := testdb.Scratch(t, sqllock.MariaDB)
				plainMariaDB(t, db)
				key := locktest.Key(t)
				drawn := w.run(t, db.DB, s.open, key)
				fresh, err := sql.Open(db.Driver, db.DSN)
				if err != nil {
					t.Fatal(err)
				}
				defer fresh.Close()
				if after := rounds(t, fresh, sqllock.MariaDB, s.open, key, 1); after <= drawn {
					t.Fatalf("tokens drawn %s ended at %d; a fresh handle's first on the MariaDB path got %d", w.name, drawn, after)
				}
			})
		}
	}
}
