package rowlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// servers are the dialects rowlock serves.
var servers = []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB}

// forEachServer runs fn as a subtest per served dialect.
func forEachServer(t *testing.T, fn func(t *testing.T, db *testdb.DB)) {
	for _, d := range servers {
		t.Run(d.String(), func(t *testing.T) { fn(t, testdb.Open(t, d)) })
	}
}

// newLocker returns a Locker closed when the test ends.
func newLocker(t testing.TB, db *testdb.DB, opts ...rowlock.Option) *rowlock.Locker {
	t.Helper()
	l, err := rowlock.New(db.DB, db.Dialect, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sessionOf returns the server session id of a lease's transaction.
func sessionOf(t testing.TB, d sqllock.Dialect, l sqllock.Lease) int64 {
	t.Helper()
	q := map[sqllock.Dialect]string{sqllock.Postgres: "SELECT pg_backend_pid()", sqllock.MariaDB: "SELECT CONNECTION_ID()"}[d]
	var id int64
	if err := l.(*rowlock.Lease).Tx().QueryRowContext(context.Background(), q).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// killSession plays an administrator (or a failover) ending a session.
func killSession(t testing.TB, db *testdb.DB, id int64) {
	t.Helper()
	var err error
	if db.Dialect == sqllock.Postgres {
		var ok bool
		err = db.QueryRowContext(context.Background(), "SELECT pg_terminate_backend($1)", id).Scan(&ok)
		if err == nil && !ok {
			err = errors.New("pg_terminate_backend returned false")
		}
	} else {
		_, err = db.ExecContext(context.Background(), "KILL CONNECTION "+itoa(id))
	}
	if err != nil {
		t.Fatalf("kill session %d: %v", id, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestConformance(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		locktest.Run(t, locktest.Target{
			DB: db,
			New: func(t testing.TB) sqllock.Locker {
				return newLocker(t, db, rowlock.WithCheckInterval(200*time.Millisecond))
			},
			Steal:      func(t testing.TB, l sqllock.Lease) { killSession(t, db, sessionOf(t, db.Dialect, l)) },
			LossWithin: 5 * time.Second,
			Exclusive:  true,
		})
	})
}

func TestSQLiteUnsupported(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	l, err := rowlock.New(db.DB, db.Dialect)
	if !errors.Is(err, sqllock.ErrUnsupported) || l != nil {
		t.Fatalf("New on SQLite = %v, %v; want ErrUnsupported", l, err)
	}
	if !strings.Contains(err.Error(), "tablelock") {
		t.Errorf("error %q does not name the alternative, tablelock", err)
	}
	if _, err := rowlock.Schema(sqllock.SQLite, rowlock.DefaultTable); !errors.Is(err, sqllock.ErrUnsupported) {
		t.Errorf("Schema on SQLite = %v, want ErrUnsupported", err)
	}
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := rowlock.LockRows(context.Background(), tx, sqllock.SQLite, "t", "id", 1); !errors.Is(err, sqllock.ErrUnsupported) {
		t.Errorf("LockRows on SQLite = %v, want ErrUnsupported", err)
	}
}

// TestCloseWhileSessionKilled: the server kills a held lease's session
// while its Locker closes. Either may end the lease first; it ends lost,
// and Close returns. With -race it runs the interleaving in which a loss
// reported by the session watch once Close had begun started its clean-up
// on the WaitGroup Close was waiting on (a race the detector caught once
// in the conformance tests; it needs a narrow window, and these rounds
// are not sure to hit it). Each round has a pool of its own: the kill may
// land on the connection after Close gave it back to the pool.
func TestCloseWhileSessionKilled(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		for i := range 30 {
			pool := testdb.Fresh(t, db.Dialect, 0)
			l, err := rowlock.New(pool.DB, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			lease, err := l.Acquire(ctx, "close-kill-"+itoa(int64(i)))
			if err != nil {
				t.Fatal(err)
			}
			id := sessionOf(t, db.Dialect, lease)
			q := "KILL CONNECTION " + itoa(id)
			if db.Dialect == sqllock.Postgres {
				q = "SELECT pg_terminate_backend(" + itoa(id) + ")"
			}
			killed := make(chan struct{})
			go func() {
				defer close(killed)
				db.ExecContext(context.Background(), q) // the session may be gone already
			}()
			if err := l.Close(); err != nil {
				t.Fatalf("round %d: Close: %v", i, err)
			}
			<-killed
			select {
			case <-lease.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: the lease did not end after Close and the kill", i)
			}
			if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
				t.Fatalf("round %d: lease.Err() = %v, want ErrLockLost", i, err)
			}
		}
	})
}
