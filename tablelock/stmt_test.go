package tablelock_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// TestCloseClosesStatements: closed Lockers leave no prepared statement on
// the server, where each counts toward max_prepared_stmt_count until every
// prepare on the server fails. A lease held across Close keeps renewing on
// its statements, which close when it ends. Counted on one MariaDB session.
func TestCloseClosesStatements(t *testing.T) {
	db := testdb.Fresh(t, sqllock.MySQL, 1)
	ctx := context.Background()
	before, session := testdb.SessionStatements(t, db.DB)

	for range 50 {
		l, err := tablelock.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Acquire(ctx, locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	after, again := testdb.SessionStatements(t, db.DB)
	if again != session {
		t.Fatalf("the handle's session changed (%d, then %d): counts not comparable", session, again)
	}
	if after != before {
		t.Errorf("50 closed Lockers left %d prepared statements open on the session", after-before)
	}

	// A lease outliving its Locker's Close renews past its TTL, then its
	// Release closes the statements.
	l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, locktest.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	time.Sleep(time.Second)
	if err := lease.Err(); err != nil {
		t.Fatalf("a lease held across Close stopped renewing: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := testdb.SessionStatements(t, db.DB); after != before {
		t.Errorf("the last lease of a closed Locker ended, %d prepared statements still open", after-before)
	}
}
