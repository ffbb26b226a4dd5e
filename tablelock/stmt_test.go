package tablelock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// TestCloseClosesStatements: closed Lockers leave no prepared statement on
// the server, where each counts toward max_prepared_stmt_count until every
// prepare on the server fails. Close closes them even while a lease is
// held: it ends that lease. Counted on one MariaDB session.
func TestCloseClosesStatements(t *testing.T) {
	db := testdb.Fresh(t, sqllock.MariaDB, 1)
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

	// Close ends a lease still held as lost and closes the statements at
	// once; the lease's Release afterwards leaves none open either.
	l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, locktest.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
		t.Fatalf("a lease held across Close: Err = %v, want ErrLockLost", err)
	}
	if after, _ := testdb.SessionStatements(t, db.DB); after != before {
		t.Errorf("a Locker closed while holding a lease left %d prepared statements open", after-before)
	}
	if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("Release of a lease ended by Close = %v, want ErrLockLost", err)
	}
	if after, _ := testdb.SessionStatements(t, db.DB); after != before {
		t.Errorf("the Release of a lease ended by Close left %d prepared statements open", after-before)
	}
}
