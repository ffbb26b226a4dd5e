package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestCloseClosesStatements: closed Lockers leave no prepared statement on
// the server, where each counts toward max_prepared_stmt_count until every
// prepare on the server fails. A lease held across Close ends as lost and
// its transaction is gone. Counted on one MariaDB session.
func TestCloseClosesStatements(t *testing.T) {
	db := testdb.Fresh(t, sqllock.MariaDB, 1)
	ctx := context.Background()
	before, session := testdb.SessionStatements(t, db.DB)

	for i := range 50 {
		l, err := rowlock.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		acquire := l.Acquire
		if i%2 == 1 {
			acquire = l.TryAcquire
		}
		lease, err := acquire(ctx, locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			// Held across Close: lost, and its transaction rolled back.
			l.Close()
			if _, err := lease.(*rowlock.Lease).Tx().ExecContext(ctx, "SELECT 1"); !errors.Is(err, sql.ErrTxDone) {
				t.Fatalf("the transaction of a lease held across Close: %v, want ErrTxDone", err)
			}
			if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
				t.Fatalf("Release of a lease held across Close = %v, want ErrLockLost", err)
			}
		} else if err := lease.Release(ctx); err != nil {
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
}
