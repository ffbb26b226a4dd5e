package tablelock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// TestPgBouncer runs the conformance suite through PgBouncer in transaction
// mode with a pool of one server session shared by every client: no
// prepared statement survives from one transaction to the next there, and
// no LISTEN reaches a client. Without WithTransactionPooler the suite fails
// at once ("prepared statement ... already exists").
func TestPgBouncer(t *testing.T) {
	db := testdb.PgBouncer(t)
	locktest.Run(t, locktest.Target{
		DB: db,
		New: func(t testing.TB) sqllock.Locker {
			return newLocker(t, db, tablelock.WithTTL(900*time.Millisecond), tablelock.WithTransactionPooler())
		},
		Steal:      func(t testing.TB, l sqllock.Lease) { deleteRow(t, db, l.Key()) },
		LossWithin: 2 * time.Second,
		Reentrant:  true,
		Exclusive:  true,
	})
}

func TestTransactionPoolerRefusesNotify(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	_, err := tablelock.New(db.DB, db.Dialect, tablelock.WithNotify(true), tablelock.WithTransactionPooler())
	if !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Fatalf("New(WithNotify(true), WithTransactionPooler()) = %v, want ErrInvalidOption", err)
	}
	l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithNotify(false), tablelock.WithTransactionPooler())
	if err != nil {
		t.Fatalf("New(WithNotify(false), WithTransactionPooler()) = %v", err)
	}
	l.Close()
}
