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
)

// TestExtendContract: tablelock leases extend; the session-held leases
// (rowlock, advisory) have no expiry, and Extend says so with
// ErrUnsupported naming the key, leaving the lease held.
func TestExtendContract(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *testdb.DB, tg multiTarget) {
		ctx := context.Background()
		key := locktest.Key(t)
		lease, err := tg.new(t, db).Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		err = sqllock.Extend(ctx, lease, time.Minute)
		_, extender := lease.(sqllock.Extender)
		switch {
		case tg.name == "tablelock":
			if !extender || err != nil {
				t.Fatalf("tablelock lease: Extender %v, Extend: %v", extender, err)
			}
		case extender || !errors.Is(err, sqllock.ErrUnsupported) || !strings.Contains(err.Error(), key):
			t.Fatalf("%s lease: Extender %v, Extend: %v; want ErrUnsupported naming %q", tg.name, extender, err, key)
		}
		if err := lease.Err(); err != nil {
			t.Fatalf("the lease after Extend: %v", err)
		}
	})
}
