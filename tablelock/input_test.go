package tablelock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// rowState reads key's row as text, to show that a refused call changed
// nothing; "" when there is no row.
func rowState(t testing.TB, db *testdb.DB, table, key string) string {
	t.Helper()
	ph := "?"
	if db.Dialect == sqllock.Postgres {
		ph = "$1"
	}
	var owner, host, holds, token, exp any
	err := db.QueryRow("SELECT owner, host, hold_count, token, expires_at FROM "+table+" WHERE lock_key = "+ph, key).
		Scan(&owner, &host, &holds, &token, &exp)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s|%s|%v|%v|%v", owner, host, holds, token, exp)
}

func TestBadOptions(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		for name, opt := range map[string]tablelock.Option{
			"injected table":   tablelock.WithTable("sqllock_locks; DROP TABLE sqllock_locks"),
			"quoted table":     tablelock.WithTable(`sqllock_locks"`),
			"empty table":      tablelock.WithTable(""),
			"three-part table": tablelock.WithTable("a.b.c"),
			"zero TTL":         tablelock.WithTTL(0),
			"negative TTL":     tablelock.WithTTL(-time.Second),
			"TTL below min":    tablelock.WithTTL(time.Millisecond),
			"negative renew":   tablelock.WithRenewInterval(-time.Second),
			"renew past TTL":   tablelock.WithRenewInterval(time.Minute),
			"negative margin":  tablelock.WithSafetyMargin(-time.Second),
			"negative backoff": tablelock.WithMaxBackoff(-time.Second),
			"zero wait bound":  tablelock.WithWaitBound(0),
			"zero claim":       tablelock.WithClaimWindow(0),
			"claim past TTL":   tablelock.WithClaimWindow(time.Minute),
		} {
			l, err := tablelock.New(db.DB, db.Dialect, opt)
			if !errors.Is(err, sqllock.ErrInvalidOption) {
				if l != nil {
					l.Close()
				}
				t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
			}
		}
		if _, err := tablelock.New(nil, db.Dialect); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("nil db: New = %v, want ErrInvalidOption", err)
		}
		if _, err := tablelock.New(db.DB, sqllock.Dialect(99)); err == nil {
			t.Error("unknown dialect accepted")
		}
		// The lock table is still there and usable.
		lease, err := newLocker(t, db).Acquire(context.Background(), locktest.Key(t))
		if err != nil {
			t.Fatalf("lock table damaged by a refused option: %v", err)
		}
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Only the owner releases: another owner, or none, is told ErrNotHeld and
// the row is left exactly as it was.
func TestReleaseKeyByOthersChangesNothing(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l := newLocker(t, db)
		key := locktest.Key(t)
		mine := sqllock.WithOwner(ctx, "owner-mine")
		lease, err := l.Acquire(mine, key)
		if err != nil {
			t.Fatal(err)
		}
		before := rowState(t, db, tablelock.DefaultTable, key)
		for name, c := range map[string]context.Context{
			"other owner": sqllock.WithOwner(ctx, "owner-theirs"),
			"no owner":    ctx,
		} {
			err := l.ReleaseKey(c, key)
			if !errors.Is(err, sqllock.ErrNotHeld) || !strings.Contains(err.Error(), key) {
				t.Errorf("%s: ReleaseKey = %v, want ErrNotHeld naming %q", name, err, key)
			}
		}
		if err := l.ReleaseKey(mine, ""); !errors.Is(err, sqllock.ErrInvalidKey) {
			t.Errorf("ReleaseKey of an empty key = %v, want ErrInvalidKey", err)
		}
		if after := rowState(t, db, tablelock.DefaultTable, key); after != before {
			t.Fatalf("row changed by refused releases:\n before %s\n after  %s", before, after)
		}
		if err := lease.Err(); err != nil {
			t.Fatalf("lease hurt by refused releases: %v", err)
		}
		// The owner can release by key, for a process that lost its lease
		// object; the lease then finds itself gone.
		if err := l.ReleaseKey(mine, key); err != nil {
			t.Fatal(err)
		}
		if err := l.ReleaseKey(mine, key); !errors.Is(err, sqllock.ErrNotHeld) {
			t.Errorf("second ReleaseKey = %v, want ErrNotHeld", err)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Release of a lease released by key = %v, want ErrLockLost", err)
		}
	})
}

// Schema generates exactly the table the shipped migrations leave behind
// (00001, and 00006 on MySQL): a table made from it has the migrated
// table's columns, types, collations and indexes.
func TestSchemaMatchesMigration(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		table := fmt.Sprintf("tl_schema_%x", rand.Uint64())
		if err := tablelock.CreateTable(context.Background(), db.DB, db.Dialect, table); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
		if got, want := testdb.Shape(t, db, table), testdb.Shape(t, db, tablelock.DefaultTable); got != want {
			t.Fatalf("a table made by Schema differs from the migrated one:\n got\n%s\n want\n%s", got, want)
		}
	})
	if _, err := tablelock.Schema(sqllock.Postgres, "bad name"); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("Schema with a bad name = %v", err)
	}
}

// A table made by CreateTable under another name serves a Locker, and its
// locks stay in that table.
func TestWithTable(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		table := fmt.Sprintf("tl_custom_%d", os.Getpid())
		db.Exec("DROP TABLE IF EXISTS " + table)
		if err := tablelock.CreateTable(ctx, db.DB, db.Dialect, table); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
		a := newLocker(t, db, tablelock.WithTable(table))
		b := newLocker(t, db, tablelock.WithTable(table))
		other := newLocker(t, db)
		key := locktest.Key(t)
		lease, err := a.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("second locker on the custom table: %v, want ErrNotAcquired", err)
		}
		if rowState(t, db, table, key) == "" {
			t.Fatalf("no row for %q in %s", key, table)
		}
		// The default table is a different lock space.
		ol, err := other.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("default table refused a key held only in %s: %v", table, err)
		}
		if ol.Token() <= lease.Token() {
			t.Errorf("tokens from one sequence: %d then %d", lease.Token(), ol.Token())
		}
		for _, x := range []sqllock.Lease{lease, ol} {
			if err := x.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// On PostgreSQL, asynchronous commit keeps every guarantee the suite checks
// while the server runs (a crash may lose a release, delaying the key by at
// most a TTL, never granting it twice).
func TestConformanceAsyncCommit(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	conformance(t, db, tablelock.WithAsyncCommit(true))
}

// ForceRelease frees the holder it names by token, and nothing else: a
// token that no longer holds the key is told who does, and the row is left
// as it was.
func TestForceReleaseNamesTheHolder(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l, op := newLocker(t, db, tablelock.WithTTL(time.Minute)), newLocker(t, db)
		key := locktest.Key(t)
		lease, err := l.Acquire(sqllock.WithOwner(ctx, "billing-7"), key)
		if err != nil {
			t.Fatal(err)
		}
		before := rowState(t, db, tablelock.DefaultTable, key)
		for _, bad := range []int64{0, -1} {
			if ok, err := op.ForceRelease(ctx, key, bad); ok || !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("ForceRelease with token %d = %v, %v; want ErrInvalidOption", bad, ok, err)
			}
		}
		ok, err := op.ForceRelease(ctx, key, lease.Token()+1000)
		if ok || !errors.Is(err, sqllock.ErrNotHeld) || !strings.Contains(err.Error(), fmt.Sprintf("token %d now", lease.Token())) || !strings.Contains(err.Error(), "billing-7") {
			t.Errorf("ForceRelease naming another holder = %v, %v; want ErrNotHeld naming token %d and owner billing-7", ok, err, lease.Token())
		}
		if after := rowState(t, db, tablelock.DefaultTable, key); after != before {
			t.Errorf("a refused ForceRelease changed the row:\n before %s\n after  %s", before, after)
		}
		if ok, err := op.ForceRelease(ctx, key, lease.Token()); !ok || err != nil {
			t.Fatalf("ForceRelease of the holder = %v, %v; want true", ok, err)
		}
		if ok, err := op.ForceRelease(ctx, key, lease.Token()); ok || err != nil {
			t.Errorf("second ForceRelease = %v, %v; want false, nil: the key is free", ok, err)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Release after ForceRelease = %v, want ErrLockLost", err)
		}
	})
}
