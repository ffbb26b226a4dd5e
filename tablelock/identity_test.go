package tablelock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// lookAlikes are pairs of identities that differ only in case or only in
// trailing space. MariaDB's default collation (utf8mb4_general_ci) folds
// both; a lock table must not.
var lookAlikes = []struct{ name, a, b string }{
	{"case", "WORKER-A", "worker-a"},
	{"trailing space", "worker-a", "worker-a "},
}

// lockTables returns the default lock table and one made by CreateTable,
// dropped when the test ends: both must tell look-alikes apart.
func lockTables(t *testing.T, db *testdb.DB) []string {
	t.Helper()
	custom := fmt.Sprintf("tl_ident_%x", rand.Uint64())
	if err := tablelock.CreateTable(context.Background(), db.DB, db.Dialect, custom); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + custom) })
	return []string{tablelock.DefaultTable, custom}
}

// TestOwnersCompareBytes: an owner that only looks like the holder is
// another owner. Its ReleaseKey frees nothing, its TryAcquire is refused
// and adds no hold to the holder's row, and the holder's single Release
// frees the key for a third owner at once.
func TestOwnersCompareBytes(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		for _, table := range lockTables(t, db) {
			for _, la := range lookAlikes {
				t.Run(table+"/"+la.name, func(t *testing.T) {
					holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute))
					other := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute))
					key := locktest.Key(t)
					lease, err := holder.Acquire(sqllock.WithOwner(ctx, la.a), key)
					if err != nil {
						t.Fatal(err)
					}
					before := rowState(t, db, table, key)

					lookAlike := sqllock.WithOwner(ctx, la.b)
					if s, err := other.TryAcquire(lookAlike, key); !errors.Is(err, sqllock.ErrNotAcquired) {
						if s != nil {
							_ = s.Release(ctx)
						}
						t.Errorf("TryAcquire by owner %q of a key held by %q = %v, want ErrNotAcquired", la.b, la.a, err)
					}
					if after := rowState(t, db, table, key); after != before {
						t.Errorf("a refused TryAcquire by owner %q changed %q's row:\n before %s\n after  %s", la.b, la.a, before, after)
					}
					if err := other.ReleaseKey(lookAlike, key); !errors.Is(err, sqllock.ErrNotHeld) {
						t.Errorf("ReleaseKey by owner %q of a key held by %q = %v, want ErrNotHeld", la.b, la.a, err)
					}
					if after := rowState(t, db, table, key); after != before {
						t.Errorf("ReleaseKey by owner %q changed %q's row:\n before %s\n after  %s", la.b, la.a, before, after)
					}
					if err := lease.Err(); err != nil {
						t.Fatalf("holder's lease hurt by a look-alike owner: %v", err)
					}

					if err := lease.Release(ctx); err != nil {
						t.Fatal(err)
					}
					third, err := other.TryAcquire(sqllock.WithOwner(ctx, "worker-b"), key)
					if err != nil {
						t.Fatalf("key not free after its holder's one Release: %v", err)
					}
					if err := third.Release(ctx); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	})
}

// TestKeysCompareBytes: keys that differ only in case or trailing space
// are different locks, held at once by different owners.
func TestKeysCompareBytes(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		for _, table := range lockTables(t, db) {
			for _, la := range lookAlikes {
				t.Run(table+"/"+la.name, func(t *testing.T) {
					l := newLocker(t, db, tablelock.WithTable(table))
					base := locktest.Key(t)
					a, err := l.TryAcquire(ctx, base+"/"+la.a)
					if err != nil {
						t.Fatal(err)
					}
					defer a.Release(ctx)
					b, err := l.TryAcquire(ctx, base+"/"+la.b)
					if err != nil {
						t.Fatalf("key %q refused while only %q is held: %v", base+"/"+la.b, base+"/"+la.a, err)
					}
					defer b.Release(ctx)
				})
			}
		}
	})
}

// TestBadOwnerRefused: an owner that is not valid UTF-8 or holds a NUL is
// refused before any statement, as a bad key is, and changes nothing.
func TestBadOwnerRefused(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l := newLocker(t, db)
		key := locktest.Key(t)
		for _, owner := range []string{"worker-\xff", "worker\x00-7"} {
			bad := sqllock.WithOwner(ctx, owner)
			if s, err := l.TryAcquire(bad, key); !errors.Is(err, sqllock.ErrInvalidOption) {
				if s != nil {
					_ = s.Release(ctx)
				}
				t.Errorf("TryAcquire with owner %q = %v, want ErrInvalidOption", owner, err)
			}
			if err := l.ReleaseKey(bad, key); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("ReleaseKey with owner %q = %v, want ErrInvalidOption", owner, err)
			}
		}
		if s := rowState(t, db, tablelock.DefaultTable, key); s != "" {
			t.Errorf("a refused owner left a row: %s", s)
		}
	})
}
