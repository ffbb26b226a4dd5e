package tablelock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// remaining reads how long key's row stays taken, on the database clock.
func remaining(t testing.TB, db *testdb.DB, key string) time.Duration {
	t.Helper()
	q := map[sqllock.Dialect]string{
		sqllock.Postgres: "SELECT (extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM sqllock_locks WHERE lock_key = $1",
		sqllock.MariaDB:  "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM sqllock_locks WHERE lock_key = ?",
		sqllock.MySQL:    "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM sqllock_locks WHERE lock_key = ?",
		sqllock.SQLite:   "SELECT expires_at - CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM sqllock_locks WHERE lock_key = ?",
	}[db.Dialect]
	var us int64
	if err := db.QueryRowContext(context.Background(), q, key).Scan(&us); err != nil {
		t.Fatal(err)
	}
	return time.Duration(us) * time.Microsecond
}

// expireRow plays the database clock passing the row's expiry while its
// holder still believes it holds the key.
func expireRow(t testing.TB, db *testdb.DB, key string) {
	t.Helper()
	q := map[sqllock.Dialect]string{
		sqllock.Postgres: "UPDATE sqllock_locks SET expires_at = now() - interval '1 second' WHERE lock_key = $1",
		sqllock.MariaDB:  "UPDATE sqllock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE lock_key = ?",
		sqllock.MySQL:    "UPDATE sqllock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE lock_key = ?",
		sqllock.SQLite:   "UPDATE sqllock_locks SET expires_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) - 1000000 WHERE lock_key = ?",
	}[db.Dialect]
	if _, err := db.ExecContext(context.Background(), q, key); err != nil {
		t.Fatal(err)
	}
}

// TestExtendPastTTL: an extended lease is held past its TTL, the
// automatic renewals that follow do not shorten the extension, and once it
// has run out the renewals keep the lease as before.
func TestExtendPastTTL(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		// A TTL of 1.2 s: with 600 ms a renewal that took 250 ms under
		// -race on a loaded machine lost the lease (the MySQL path step).
		const ttl, ext = 1200 * time.Millisecond, 6 * time.Second
		l := newLocker(t, db, tablelock.WithTTL(ttl), tablelock.WithRenewInterval(300*time.Millisecond))
		other := newLocker(t, db)
		key := locktest.Key(t)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		if err := sqllock.Extend(ctx, lease, ext); err != nil {
			t.Fatal(err)
		}
		if r := remaining(t, db, key); r <= ttl || r > ext {
			t.Fatalf("after Extend(%v) the row has %v left, want in (%v, %v]", ext, r, ttl, ext)
		}
		time.Sleep(3 * ttl / 2) // several renewals, and past the TTL
		if err := lease.Err(); err != nil {
			t.Fatalf("extended lease lost past its TTL: %v", err)
		}
		if r := remaining(t, db, key); r <= ttl || r > ext-ttl {
			t.Fatalf("after renewals the row has %v left, want the extension's (in (%v, %v]): a renewal shortened it", r, ttl, ext-ttl)
		}
		if _, err := other.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of an extended key: %v, want ErrNotAcquired", err)
		}
		time.Sleep(ext) // the extension runs out; renewal goes on
		if err := lease.Err(); err != nil {
			t.Fatalf("lease lost after its extension ran out: %v", err)
		}
		if r := remaining(t, db, key); r <= 0 || r > ttl {
			t.Fatalf("after the extension the row has %v left, want the TTL's (in (0, %v])", r, ttl)
		}
		if _, err := other.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a renewed key: %v, want ErrNotAcquired", err)
		}
	})
}

// TestExtendExpired: a lease whose row expired on the database cannot be
// extended: Extend says it is lost, ends it, and the key goes to another.
func TestExtendExpired(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		l := newLocker(t, db, tablelock.WithTTL(20*time.Second))
		other := newLocker(t, db)
		key := locktest.Key(t)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		expireRow(t, db, key)
		err = sqllock.Extend(ctx, lease, time.Minute)
		if !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Extend of an expired lease: %v, want ErrLockLost", err)
		}
		select {
		case <-lease.Done():
		default:
			t.Fatal("Done still open after Extend found the lease lost")
		}
		if r := remaining(t, db, key); r > 0 {
			t.Fatalf("the failed Extend moved the expired row's expiry to %v ahead", r)
		}
		taken, err := other.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("the expired key is not free after a refused Extend: %v", err)
		}
		defer taken.Release(ctx)
		if !errors.Is(lease.Release(ctx), sqllock.ErrLockLost) {
			t.Fatal("Release after the loss does not report it")
		}
		if err := sqllock.Extend(ctx, lease, time.Minute); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Extend of a lost, released lease: %v, want its loss", err)
		}
		if err := taken.(sqllock.Extender).Extend(ctx, time.Minute); err != nil {
			t.Fatalf("the new holder cannot extend: %v", err)
		}
	})
}

// TestExtendRefusals: bad durations and released leases are refused and
// change nothing.
func TestExtendRefusals(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		const ttl = 5 * time.Second
		l := newLocker(t, db, tablelock.WithTTL(ttl))
		key := locktest.Key(t)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []time.Duration{0, -time.Second} {
			err := sqllock.Extend(ctx, lease, d)
			if !errors.Is(err, sqllock.ErrInvalidOption) || !contains(err, key) {
				t.Fatalf("Extend(%v): %v, want ErrInvalidOption naming %q", d, err, key)
			}
		}
		if r := remaining(t, db, key); r > ttl {
			t.Fatalf("refused Extends left %v on the row, above the TTL %v", r, ttl)
		}
		// A shorter extension leaves the longer expiry alone.
		if err := sqllock.Extend(ctx, lease, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if r := remaining(t, db, key); r < ttl/2 {
			t.Fatalf("Extend(1ms) shortened the row to %v", r)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sqllock.Extend(ctx, lease, time.Minute); !errors.Is(err, sqllock.ErrReleased) {
			t.Fatalf("Extend after Release: %v, want ErrReleased", err)
		}
		if r := remaining(t, db, key); r > 0 {
			t.Fatalf("Extend after Release took the key again (%v left)", r)
		}
	})
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }
