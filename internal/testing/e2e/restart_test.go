package e2e_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// envRestart names a command that restarts a test database server: it is
// run with the dialect's name ("postgres", "mariadb", or "mysql" on the
// MySQL path) and returns once the server is back.
// .ci/run sets it for a separate step, after the parallel test run, since a
// restart would break every other package's tests.
const envRestart = "SQLLOCK_RESTART_CMD"

// A database restart, for each strategy that holds across time:
//   - rowlock and advisory live in the server's sessions, which the restart
//     ends: their holders are told (Done, ErrLockLost), and the key is free
//     once the server is back;
//   - tablelock lives in a committed row, which survives: with a TTL longer
//     than the outage the holder keeps its key and no one else gets it;
//   - so do the semaphore, rwlock and election grants, on the same table;
//   - tokens handed out after the restart are above those before it.
func TestDatabaseRestart(t *testing.T) {
	cmdline := os.Getenv(envRestart)
	if cmdline == "" {
		t.Skipf("%s is not set: database restarts run in their own CI step", envRestart)
	}
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			ctx := context.Background()
			tl, err := tablelock.New(db.DB, d, tablelock.WithTTL(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			rl, err := rowlock.New(db.DB, d, rowlock.WithCheckInterval(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Close()
			al, err := advisory.New(db.DB, d, advisory.WithCheckInterval(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer al.Close()
			prims := holdPrimitives(t, db)
			session := map[string]sqllock.Locker{"rowlock": rl, "advisory": al}
			held := map[string]sqllock.Lease{}
			for name, l := range map[string]sqllock.Locker{"tablelock": tl, "rowlock": rl, "advisory": al} {
				lease, err := l.Acquire(ctx, locktest.Key(t)+"-"+name)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				held[name] = lease
			}

			out, err := exec.Command(cmdline, d.String()).CombinedOutput()
			if err != nil {
				t.Fatalf("restart %v: %v\n%s", d, err, out)
			}

			for name, l := range session {
				lease := held[name]
				select {
				case <-lease.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: lease not ended 10s after the restart", name)
				}
				if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
					t.Errorf("%s: Err() after restart = %v, want ErrLockLost", name, err)
				}
				next := acquireWithin(t, l, lease.Key(), 10*time.Second)
				if next.Token() <= lease.Token() {
					t.Errorf("%s: token after restart %d not above %d", name, next.Token(), lease.Token())
				}
				if err := next.Release(ctx); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}

			// The table lock outlived the restart: still ours, renewed, and
			// refused to anyone else.
			lease := held["tablelock"]
			if err := lease.Err(); err != nil {
				t.Fatalf("tablelock: lease lost to a restart shorter than its TTL: %v", err)
			}
			other, err := tablelock.New(db.DB, d)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := other.TryAcquire(ctx, lease.Key()); !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatalf("tablelock: another owner after the restart got %v, want ErrNotAcquired", err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatalf("tablelock: Release after the restart: %v", err)
			}
			next := acquireWithin(t, other, lease.Key(), 10*time.Second)
			if next.Token() <= lease.Token() {
				t.Errorf("tablelock: token after restart %d not above %d", next.Token(), lease.Token())
			}
			if err := next.Release(ctx); err != nil {
				t.Error(err)
			}
			prims.check(t, db)
		})
	}
}

// acquireWithin takes key on l, retrying while the pool still hands out
// connections that died with the server.
func acquireWithin(t *testing.T, l sqllock.Locker, key string, within time.Duration) sqllock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		lease, err := l.Acquire(ctx, key)
		if err == nil {
			return lease
		}
		if ctx.Err() != nil {
			t.Fatalf("key %q not back %v after the restart: %v", key, within, err)
		}
		t.Logf("acquire %q after the restart: %v (retrying)", key, err)
		time.Sleep(50 * time.Millisecond)
	}
}
