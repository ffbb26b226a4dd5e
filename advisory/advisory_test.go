package advisory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// dialects are the ones advisory serves.
var dialects = []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB}

func forEach(t *testing.T, fn func(t *testing.T, db *testdb.DB)) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) { fn(t, testdb.Open(t, d)) })
	}
}

// newLocker returns a Locker closed when the test ends, checking its
// sessions often so losses show quickly.
func newLocker(t testing.TB, db *testdb.DB, opts ...advisory.Option) *advisory.Locker {
	t.Helper()
	opts = append([]advisory.Option{advisory.WithCheckInterval(100 * time.Millisecond)}, opts...)
	l, err := advisory.New(db.DB, db.Dialect, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mysqlName is key's GET_LOCK name (namespace "sqllock"), one on both
// paths.
func mysqlName(_ *testdb.DB, key string) string {
	return advisory.MySQLName(advisory.DefaultNamespace, key)
}

// holders asks the server which sessions hold key's lock (in namespace
// "sqllock"): PostgreSQL backend pids from pg_locks, the MySQL connection
// id from IS_USED_LOCK.
func holders(t testing.TB, db *testdb.DB, key string) []int64 {
	t.Helper()
	ctx := context.Background()
	if db.Dialect.IsMySQL() {
		var id *int64
		if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", mysqlName(db, key)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id == nil {
			return nil
		}
		return []int64{*id}
	}
	id := advisory.PostgresKey(advisory.DefaultNamespace, key)
	rows, err := db.QueryContext(ctx, `SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1 AND granted
ORDER BY pid`, int64(uint64(id)>>32), int64(uint32(id)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int64
	for rows.Next() {
		var pid int64
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// killSession ends a server session from outside, as an administrator would.
func killSession(t testing.TB, db *testdb.DB, id int64) {
	t.Helper()
	var err error
	if db.Dialect.IsMySQL() {
		_, err = db.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", id))
	} else {
		_, err = db.ExecContext(context.Background(), "SELECT pg_terminate_backend($1)", id)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// killHolder kills the session holding key.
func killHolder(t testing.TB, db *testdb.DB, key string) {
	t.Helper()
	ids := holders(t, db, key)
	if len(ids) != 1 {
		t.Fatalf("server shows holders %v of %q, want one", ids, key)
	}
	killSession(t, db, ids[0])
}

func TestConformance(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		locktest.Run(t, locktest.Target{
			DB:         db,
			New:        func(t testing.TB) sqllock.Locker { return newLocker(t, db) },
			Steal:      func(t testing.TB, l sqllock.Lease) { killHolder(t, db, l.Key()) },
			LossWithin: 5 * time.Second,
			Reentrant:  true,
			Exclusive:  true,
		})
	})
}

func TestSQLiteUnsupported(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	l, err := advisory.New(db.DB, sqllock.SQLite)
	if !errors.Is(err, sqllock.ErrUnsupported) || l != nil {
		t.Fatalf("New on SQLite = %v, %v; want ErrUnsupported", l, err)
	}
	if !strings.Contains(err.Error(), "tablelock") {
		t.Errorf("error %q does not name the alternative", err)
	}
}

func TestOptions(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	for _, tc := range []struct {
		name string
		opt  advisory.Option
		ok   bool
	}{
		{"namespace", advisory.WithNamespace("app"), true},
		{"empty namespace", advisory.WithNamespace(""), true},
		{"namespace with colon", advisory.WithNamespace("a:b"), false},
		{"namespace with NUL", advisory.WithNamespace("a\x00"), false},
		{"long namespace", advisory.WithNamespace(strings.Repeat("n", 33)), false},
		{"namespace not UTF-8", advisory.WithNamespace("\xff"), false},
		{"sessions", advisory.WithSessions(4), true},
		{"zero sessions", advisory.WithSessions(0), false},
		{"too many sessions", advisory.WithSessions(65), false},
		{"wait sessions", advisory.WithWaitSessions(8), true},
		{"no wait sessions", advisory.WithWaitSessions(0), true},
		{"negative wait sessions", advisory.WithWaitSessions(-1), false},
		{"too many wait sessions", advisory.WithWaitSessions(65), false},
		{"check interval", advisory.WithCheckInterval(time.Second), true},
		{"tiny check interval", advisory.WithCheckInterval(time.Millisecond), false},
		{"backoff", advisory.WithMaxBackoff(10 * time.Millisecond), true},
		{"tiny backoff", advisory.WithMaxBackoff(time.Microsecond), false},
		{"nil logger", advisory.WithLogger(nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := advisory.New(db.DB, sqllock.Postgres, tc.opt)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				return
			}
			if !errors.Is(err, sqllock.ErrInvalidOption) || l != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidOption", l, err)
			}
		})
	}
	if _, err := advisory.New(nil, sqllock.Postgres); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("New(nil) = %v", err)
	}
	if _, err := advisory.New(db.DB, sqllock.Dialect(42)); !errors.Is(err, sqllock.ErrInvalidOption) {
		t.Errorf("New(unknown dialect) = %v", err)
	}
}

// TestServerView: the lock is really held by the server, by one of the
// Locker's sessions, and really gone after Release; long keys too.
func TestServerView(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, l := ctxT(t), newLocker(t, db)
		short := locktest.Key(t)
		long := short + strings.Repeat("-long", 40)
		for _, key := range []string{short, long} {
			if ids := holders(t, db, key); len(ids) != 0 {
				t.Fatalf("%q held by %v before Acquire", key, ids)
			}
			lease, err := l.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if ids := holders(t, db, key); len(ids) != 1 {
				t.Fatalf("server shows holders %v of %q while held, want one", ids, key)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if ids := holders(t, db, key); len(ids) != 0 {
				t.Fatalf("%q still held by %v after Release", key, ids)
			}
		}
	})
}

// TestPostgresKeyMatchesSQL: the documented SQL expression computes the
// same id as PostgresKey, so an operator can find a key in pg_locks.
func TestPostgresKeyMatchesSQL(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	for _, key := range []string{"a", "jobs/nightly", "clé-ü", strings.Repeat("x", 255), locktest.Key(t)} {
		var got int64
		err := db.QueryRow(`SELECT ('x' || encode(substring(sha256(convert_to('sqllock:' || $1, 'UTF8')) FROM 1 FOR 8), 'hex'))::bit(64)::bigint`, key).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if want := advisory.PostgresKey("sqllock", key); got != want {
			t.Errorf("SQL id of %.20q = %d, PostgresKey = %d", key, got, want)
		}
	}
}

// TestOwnersOnOneSession: the server cannot tell two owners on one session
// apart (its locks stack), so the Locker must.
func TestOwnersOnOneSession(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		l := newLocker(t, db, advisory.WithSessions(1))
		a := sqllock.WithOwner(ctx, "owner-a")
		b := sqllock.WithOwner(ctx, "owner-b")
		lease, err := l.Acquire(a, key)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.TryAcquire(b, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("another owner on the same session got %v, %v", got, err)
		}
		short, cancel := context.WithTimeout(b, 100*time.Millisecond)
		defer cancel()
		if got, err := l.Acquire(short, key); !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("blocking Acquire by another owner = %v, %v", got, err)
		}
		// Unrelated keys of other owners share the session.
		other, err := l.Acquire(b, locktest.Key(t))
		if err != nil {
			t.Fatal(err)
		}
		if h1, h2 := holders(t, db, key), holders(t, db, other.Key()); len(h1) != 1 || len(h2) != 1 || h1[0] != h2[0] {
			t.Errorf("holders %v and %v: want one session for both", h1, h2)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := l.TryAcquire(b, key)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		for _, x := range []sqllock.Lease{got, other} {
			if err := x.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSessionKillEndsAllLeases: every lease on a killed session ends with
// ErrLockLost, the keys are free for others, and the Locker recovers.
func TestSessionKillEndsAllLeases(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		l := newLocker(t, db, advisory.WithSessions(1))
		var leases []sqllock.Lease
		for range 5 {
			lease, err := l.Acquire(ctx, locktest.Key(t))
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, lease)
		}
		killHolder(t, db, leases[0].Key())
		for _, lease := range leases {
			select {
			case <-lease.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("lease %q not ended within 5s of the kill", lease.Key())
			}
			if !errors.Is(lease.Err(), sqllock.ErrLockLost) {
				t.Fatalf("Err() = %v, want ErrLockLost", lease.Err())
			}
		}
		other := newLocker(t, db)
		for _, lease := range leases {
			// PostgreSQL sends the killed session its FATAL error before
			// the dying backend frees its locks: the holder is told
			// first, and the key comes back a moment later.
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			got, err := other.Acquire(c, lease.Key())
			cancel()
			if err != nil {
				t.Fatalf("key of a killed session not back within 5s: %v", err)
			}
			if got.Token() <= lease.Token() {
				t.Errorf("token %d after the loss not above %d", got.Token(), lease.Token())
			}
			if err := got.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		again, err := l.Acquire(ctx, leases[0].Key())
		if err != nil {
			t.Fatalf("Locker did not recover after its session was killed: %v", err)
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestShared(t *testing.T) {
	t.Run("mariadb", func(t *testing.T) {
		db := testdb.Open(t, sqllock.MariaDB)
		l := newLocker(t, db)
		if _, err := l.TryAcquireShared(context.Background(), locktest.Key(t)); !errors.Is(err, sqllock.ErrUnsupported) {
			t.Fatalf("TryAcquireShared on MySQL = %v, want ErrUnsupported", err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		db := testdb.Open(t, sqllock.Postgres)
		ctx, key := ctxT(t), locktest.Key(t)
		r1, r2, w := newLocker(t, db), newLocker(t, db), newLocker(t, db)
		var sl advisory.SharedLocker = r1
		a, err := sl.AcquireShared(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := r2.TryAcquireShared(ctx, key)
		if err != nil {
			t.Fatalf("second reader (another Locker) refused: %v", err)
		}
		c, err := r1.TryAcquireShared(ctx, key) // another owner, same Locker
		if err != nil {
			t.Fatalf("third reader (same Locker) refused: %v", err)
		}
		if ids := holders(t, db, key); len(ids) != 2 {
			t.Errorf("server shows %v holding the shared lock, want two sessions", ids)
		}
		if _, err := w.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("writer got the key while readers hold it: %v", err)
		}
		if _, err := r1.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("writer in the readers' Locker got the key: %v", err)
		}
		own := sqllock.WithOwner(ctx, "reader-"+key)
		d, err := r2.AcquireShared(own, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r2.TryAcquire(own, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("upgrade of a shared hold = %v, want ErrNotAcquired", err)
		}
		got := make(chan sqllock.Lease, 1)
		go func() {
			lease, err := w.Acquire(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		for i, r := range []sqllock.Lease{a, b, c, d} {
			select {
			case <-got:
				t.Fatalf("writer acquired with %d readers left", 4-i)
			case <-time.After(50 * time.Millisecond):
			}
			if err := r.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var writer sqllock.Lease
		select {
		case writer = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("writer not granted after the readers left")
		}
		if writer == nil {
			t.FailNow()
		}
		if _, err := r1.TryAcquireShared(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("reader got the key while a writer holds it: %v", err)
		}
		if writer.Token() <= a.Token() || writer.Token() <= b.Token() {
			t.Errorf("writer token %d not above readers' %d, %d", writer.Token(), a.Token(), b.Token())
		}
		if err := writer.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTx(t *testing.T) {
	t.Run("mariadb", func(t *testing.T) {
		db := testdb.Open(t, sqllock.MariaDB)
		l := newLocker(t, db)
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := l.AcquireTx(context.Background(), tx, locktest.Key(t)); !errors.Is(err, sqllock.ErrUnsupported) {
			t.Fatalf("AcquireTx on MySQL = %v, want ErrUnsupported", err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		db := testdb.Open(t, sqllock.Postgres)
		ctx, key := ctxT(t), locktest.Key(t)
		l := newLocker(t, db)
		tx1, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback()
		tok1, err := l.AcquireTx(ctx, tx1, key)
		if err != nil {
			t.Fatal(err)
		}
		if tok1 <= 0 {
			t.Errorf("token %d", tok1)
		}
		if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("session lock granted beside a transaction lock: %v", err)
		}
		tx2, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx2.Rollback()
		if _, err := l.TryAcquireTx(ctx, tx2, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquireTx of a held key = %v", err)
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := l.AcquireTx(short, tx2, key); !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AcquireTx past its deadline = %v", err)
		}
		// The cancelled wait is gone from the server, not queued behind tx1.
		id := advisory.PostgresKey(advisory.DefaultNamespace, key)
		deadline := time.Now().Add(5 * time.Second)
		for {
			var waiting int
			if err := db.QueryRow(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
AND classid::bigint = $1 AND objid::bigint = $2 AND NOT granted`, int64(uint64(id)>>32), int64(uint32(id))).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waits still queued in the server after cancel", waiting)
			}
			time.Sleep(20 * time.Millisecond)
		}
		tx2.Rollback()
		if err := tx1.Commit(); err != nil {
			t.Fatal(err)
		}
		lease, err := l.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("key still held after commit: %v", err)
		}
		if lease.Token() <= tok1 {
			t.Errorf("token %d not above the transaction's %d", lease.Token(), tok1)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// waitIdle waits for db to have no connection in use.
func waitIdle(t testing.TB, db *testdb.DB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for db.Stats().InUse > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still in use", db.Stats().InUse)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
