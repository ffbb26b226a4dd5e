package tablelock_test

import (
	"errors"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// TestPgBouncer runs the conformance suite through PgBouncer in transaction
// mode with a pool of one server session shared by every client: no
// prepared statement survives from one transaction to the next there, and
// no LISTEN reaches a client. Without WithTransactionPooler the suite fails
// at once ("prepared statement ... already exists").
func TestPgBouncer(t *testing.T) {
	db := testdb.PgBouncer(t)
	conformance(t, db, tablelock.WithTransactionPooler())
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
