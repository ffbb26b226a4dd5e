package sqllock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// A function cancelled by the loss of its lease usually returns what its
// last database call said: "context canceled". Do's error must lead with
// the loss, which is why the context ended, and still match both.
func TestDoReportsTheLossFirst(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxFor(t)
		key := locktest.Key(t)
		l := newTableLocker(t, db, tablelock.WithTTL(300*time.Millisecond))
		err := sqllock.Do(ctx, l, key, func(ctx context.Context) error {
			token, _ := sqllock.TokenFrom(ctx)
			if _, err := l.ForceRelease(ctx, key, token); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		})
		t.Logf("Do: %v", err)
		if !errors.Is(err, sqllock.ErrLockLost) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Do: %v, want an error matching ErrLockLost and context.Canceled", err)
		}
		if first, _, _ := strings.Cut(err.Error(), "\n"); !strings.Contains(first, sqllock.ErrLockLost.Error()) {
			t.Errorf("Do's message starts with %q, want the loss first", first)
		}
	})
}
