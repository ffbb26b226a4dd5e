package optimistic_test

import (
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

// TestPgBouncer runs the conformance suite through PgBouncer in transaction
// mode, where a statement prepared on one client's turn of the shared
// server session collides with another client's of the same name.
func TestPgBouncer(t *testing.T) {
	db := testdb.PgBouncer(t)
	locktest.Run(t, locktest.Target{
		DB: db,
		New: func(t testing.TB) sqllock.Locker {
			l, err := optimistic.New(db.DB, db.Dialect, optimistic.WithTransactionPooler())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
		Exclusive: false,
	})
}
