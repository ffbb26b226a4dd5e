package advisory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// WithoutToken locks as the default does but draws no token: every
// lease's token is 0 (the statement returned 0 where it would have drawn
// one), and the fence refuses it.
func TestWithoutToken(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l := newLocker(t, db, advisory.WithoutToken())
		other := newLocker(t, db)
		key := locktest.Key(t)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Token() != 0 {
			t.Errorf("Token() = %d; want 0", lease.Token())
		}
		if _, err := other.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Errorf("TryAcquire of a key held without a token = %v; want ErrNotAcquired", err)
		}
		tried, err := l.TryAcquire(ctx, locktest.Key(t))
		if err != nil || tried.Token() != 0 {
			t.Fatalf("TryAcquire: token %v, %v; want 0, nil", tried, err)
		}
		if err := tried.Release(ctx); err != nil {
			t.Fatal(err)
		}
		f, err := fence.New(db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Check(ctx, db.DB, key, lease.Token()); !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), "WithoutToken") {
			t.Errorf("fence Check of token 0 = %v; want ErrInvalidOption naming WithoutToken", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// And after it, the default draws a token again.
		next, err := other.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if next.Token() <= 0 {
			t.Errorf("the default's token after a tokenless lease: %d", next.Token())
		}
		next.Release(ctx)
	})
}
