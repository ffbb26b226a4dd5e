package rwlock_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/tablelock"
)

// rowKeys are the keys of key's lock rows: the gate ("w") and the reader
// rows ("r0", ...), by suffix.
func rowKeys(key string) map[string]string {
	rows := map[string]string{"w": key + "\x1frw:w"}
	for i := range readers {
		s := "r" + strconv.Itoa(i)
		rows[s] = key + "\x1frw:" + s
	}
	return rows
}

// remaining reads, on the database clock, how long each of key's rows
// stays taken, by suffix; a free row has none left (<= 0), a row never
// taken is absent.
func remaining(t testing.TB, db *testdb.DB, key string) map[string]time.Duration {
	t.Helper()
	q := map[sqllock.Dialect]string{
		sqllock.Postgres: "SELECT (extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM sqllock_semaphores WHERE lock_key = $1",
		sqllock.MariaDB:  "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM sqllock_semaphores WHERE lock_key = ?",
		sqllock.MySQL:    "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM sqllock_semaphores WHERE lock_key = ?",
		sqllock.SQLite:   "SELECT expires_at - CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM sqllock_semaphores WHERE lock_key = ?",
	}[db.Dialect]
	out := map[string]time.Duration{}
	for suffix, k := range rowKeys(key) {
		var us int64
		switch err := db.QueryRowContext(context.Background(), q, k).Scan(&us); {
		case err == nil:
			out[suffix] = time.Duration(us) * time.Microsecond
		case errors.Is(err, sql.ErrNoRows):
		default:
			t.Fatal(err)
		}
	}
	return out
}

// held returns the suffix of key's one row still taken, and how long it
// has left; it fails the test unless exactly one is.
func held(t testing.TB, db *testdb.DB, key string) (string, time.Duration) {
	t.Helper()
	var suffix string
	var left time.Duration
	for s, r := range remaining(t, db, key) {
		if r <= 0 {
			continue
		}
		if suffix != "" {
			t.Fatalf("rows %s and %s of %q both taken, want one", suffix, s, key)
		}
		suffix, left = s, r
	}
	if suffix == "" {
		t.Fatalf("no row of %q taken", key)
	}
	return suffix, left
}

// expire plays the database clock passing every row of key's expiry
// while its holder still believes it holds the key.
func expire(t testing.TB, db *testdb.DB, key string) {
	t.Helper()
	q := map[sqllock.Dialect]string{
		sqllock.Postgres: "UPDATE sqllock_semaphores SET expires_at = now() - interval '1 second' WHERE lock_key = $1",
		sqllock.MariaDB:  "UPDATE sqllock_semaphores SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE lock_key = ?",
		sqllock.MySQL:    "UPDATE sqllock_semaphores SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE lock_key = ?",
		sqllock.SQLite:   "UPDATE sqllock_semaphores SET expires_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) - 1000000 WHERE lock_key = ?",
	}[db.Dialect]
	for _, k := range rowKeys(key) {
		if _, err := db.ExecContext(context.Background(), q, k); err != nil {
			t.Fatal(err)
		}
	}
}

// hold takes key for reading or writing.
func hold(ctx context.Context, rw *rwlock.RWLock, key string, write bool) (*rwlock.Lease, error) {
	if write {
		return rw.Lock(ctx, key)
	}
	return rw.RLock(ctx, key)
}

// refused checks that another RWLock can neither write key nor, while a
// writer holds it, read it.
func refused(t testing.TB, ctx context.Context, other *rwlock.RWLock, key string, write bool) {
	t.Helper()
	if l, err := other.TryLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
		if err == nil {
			l.Release(ctx)
		}
		t.Fatalf("TryLock beside the hold: %v, want ErrNotAcquired", err)
	}
	if !write {
		return
	}
	if l, err := other.TryRLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
		if err == nil {
			l.Release(ctx)
		}
		t.Fatalf("TryRLock beside the write hold: %v, want ErrNotAcquired", err)
	}
}

func kinds(t *testing.T, fn func(t *testing.T, write bool)) {
	for _, write := range []bool{false, true} {
		name := "read"
		if write {
			name = "write"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, write)
		})
	}
}

// TestExtendPastTTL: a read hold (its reader row) and a write hold (its
// gate) extended past their TTL are still held after it, with the row's
// expiry on the database moved later, refused to others; the renewals
// do not shorten the extension and keep the hold once it has run out.
func TestExtendPastTTL(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		kinds(t, func(t *testing.T, write bool) {
			ctx := ctxT(t)
			const ttl, ext = 600 * time.Millisecond, 3 * time.Second
			rw := newRW(t, db, tablelock.WithTTL(ttl), tablelock.WithRenewInterval(150*time.Millisecond))
			other := newRW(t, db)
			key := locktest.Key(t)
			l, err := hold(ctx, rw, key, write)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			row, _ := held(t, db, key)
			if write != (row == "w") {
				t.Fatalf("the hold (write %v) has row %q", write, row)
			}
			if err := sqllock.Extend(ctx, l, ext); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if r, left := held(t, db, key); r != row || left <= ttl || left > ext {
				t.Fatalf("after Extend(%v) row %s has %v left, want row %s in (%v, %v]", ext, r, left, row, ttl, ext)
			}
			time.Sleep(3 * ttl / 2) // several renewals, and past the TTL
			if err := l.Err(); err != nil {
				t.Fatalf("extended hold lost past its TTL: %v", err)
			}
			if r, left := held(t, db, key); r != row || left <= ttl || left > ext-ttl {
				t.Fatalf("after renewals row %s has %v left, want row %s in (%v, %v]: a renewal shortened it", r, left, row, ttl, ext-ttl)
			}
			refused(t, ctx, other, key, write)
			time.Sleep(ext) // the extension runs out; renewal goes on
			if err := l.Err(); err != nil {
				t.Fatalf("hold lost after its extension ran out: %v", err)
			}
			if r, left := held(t, db, key); r != row || left > ttl {
				t.Fatalf("after the extension row %s has %v left, want row %s in (0, %v]", r, left, row, ttl)
			}
			refused(t, ctx, other, key, write)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			w, err := other.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("the key after Release: %v", err)
			}
			w.Release(ctx)
		})
	})
}

// TestExtendLost: a hold whose row expired on the database cannot be
// extended: Extend says it is lost, ends it (Done closed, Err lost),
// moves no expiry, and the key goes to another.
func TestExtendLost(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		kinds(t, func(t *testing.T, write bool) {
			ctx := ctxT(t)
			rw := newRW(t, db, tablelock.WithTTL(20*time.Second))
			other := newRW(t, db)
			key := locktest.Key(t)
			l, err := hold(ctx, rw, key, write)
			if err != nil {
				t.Fatal(err)
			}
			expire(t, db, key)
			if err := sqllock.Extend(ctx, l, time.Minute); !errors.Is(err, sqllock.ErrLockLost) {
				t.Fatalf("Extend of an expired hold: %v, want ErrLockLost", err)
			}
			select {
			case <-l.Done():
			default:
				t.Fatal("Done still open after Extend found the hold lost")
			}
			if err := l.Err(); !errors.Is(err, sqllock.ErrLockLost) {
				t.Fatalf("Err after the lost Extend: %v, want ErrLockLost", err)
			}
			for s, r := range remaining(t, db, key) {
				if r > 0 {
					t.Fatalf("the failed Extend left row %s %v ahead", s, r)
				}
			}
			w, err := other.TryLock(ctx, key)
			if err != nil {
				t.Fatalf("the expired key is not free after a refused Extend: %v", err)
			}
			defer w.Release(ctx)
			if err := l.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
				t.Fatalf("Release after the loss: %v, want ErrLockLost", err)
			}
			if err := sqllock.Extend(ctx, w, time.Minute); err != nil {
				t.Fatalf("the new holder cannot extend: %v", err)
			}
		})
	})
}

// TestExtendRefusals: a bad duration is refused naming the key and
// changes nothing; a released Lease says ErrReleased, even while its
// owner's other Lease keeps the hold, which still extends (one row).
func TestExtendRefusals(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		kinds(t, func(t *testing.T, write bool) {
			const ttl = 5 * time.Second
			ctx := sqllock.WithOwner(ctxT(t), "extend-owner")
			rw := newRW(t, db, tablelock.WithTTL(ttl))
			key := locktest.Key(t)
			l, err := hold(ctx, rw, key, write)
			if err != nil {
				t.Fatal(err)
			}
			again, err := hold(ctx, rw, key, write)
			if err != nil {
				t.Fatal(err)
			}
			_, before := held(t, db, key)
			for _, d := range []time.Duration{0, -time.Second} {
				err := sqllock.Extend(ctx, l, d)
				if !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), key) {
					t.Fatalf("Extend(%v): %v, want ErrInvalidOption naming %q", d, err, key)
				}
			}
			if _, left := held(t, db, key); left > before {
				t.Fatalf("a refused Extend moved the expiry from %v to %v ahead", before, left)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := sqllock.Extend(ctx, l, time.Minute); !errors.Is(err, sqllock.ErrReleased) || !strings.Contains(err.Error(), key) {
				t.Fatalf("Extend of a released Lease: %v, want ErrReleased naming %q", err, key)
			}
			if _, left := held(t, db, key); left > ttl {
				t.Fatalf("Extend of a released Lease moved the expiry to %v ahead", left)
			}
			if err := sqllock.Extend(ctx, again, time.Minute); err != nil {
				t.Fatalf("Extend of the owner's other Lease: %v", err)
			}
			if _, left := held(t, db, key); left <= ttl {
				t.Fatalf("after Extend of the other Lease the row has %v left, want more than the TTL %v", left, ttl)
			}
			if err := again.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := sqllock.Extend(ctx, again, time.Minute); !errors.Is(err, sqllock.ErrReleased) {
				t.Fatalf("Extend after the last Release: %v, want ErrReleased", err)
			}
			for s, r := range remaining(t, db, key) {
				if r > 0 {
					t.Fatalf("row %s still %v ahead after the last Release", s, r)
				}
			}
		})
	})
}
