package optimistic

import (
	"context"
	"fmt"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestLockerForgetsEndedLeases: the Locker keeps only live leases for
// Close to end; a lease ended by Release, ReleaseTx or Check is dropped, so
// a long-lived Locker does not grow with every lease it ever handed out.
func TestLockerForgetsEndedLeases(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	ctx := context.Background()
	l, err := New(db.DB, db.Dialect)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := func(i int) string { return fmt.Sprintf("%s/%d", t.Name(), i) }
	var kept []*Lease
	for i := range 30 {
		s, err := l.acquire(ctx, key(i))
		if err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0:
			err = s.Release(ctx)
		case 1:
			tx, txErr := db.BeginTx(ctx, nil)
			if txErr != nil {
				t.Fatal(txErr)
			}
			err = s.ReleaseTx(ctx, tx)
			tx.Rollback()
		default:
			kept = append(kept, s)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Half the kept ones go stale and Check finds out.
	for _, s := range kept[:5] {
		if _, err := l.acquire(ctx, s.Key()); err != nil {
			t.Fatal(err)
		}
		if err := s.Check(ctx); err == nil {
			t.Fatal("Check of a stale lease passed")
		}
	}
	l.mu.Lock()
	n := len(l.live)
	l.mu.Unlock()
	if want := 5 + 5; n != want { // 5 kept, 5 stamps that made them stale
		t.Fatalf("the Locker tracks %d leases, want the %d live ones", n, want)
	}
}
