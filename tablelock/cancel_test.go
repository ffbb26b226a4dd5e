package tablelock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// An Acquire cancelled while its statement is in flight leaves nothing
// held: a statement that commits after the cancel has its hold given back,
// so the key is free for the next caller, not stuck for a TTL.
func TestCancelledAcquireLeavesNothing(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		key := locktest.Key(t)
		other := newLocker(t, db)
		for i := range 150 {
			l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			// Cancel somewhere inside the round trip.
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(1500))*time.Microsecond)
			lease, err := l.Acquire(ctx, key)
			cancel()
			if err == nil {
				if err := lease.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: cancelled Acquire = %v", i, err)
			}
			l.Close() // waits for the give-back
			free, err := other.TryAcquire(context.Background(), key)
			if err != nil {
				t.Fatalf("round %d: key still held after a cancelled Acquire: %v", i, err)
			}
			if err := free.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
