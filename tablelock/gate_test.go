package tablelock_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// gateWaits counts the sessions of this database blocked on a gate: the
// gate wait's statement, in the "User lock" state. The tests of this
// package run one at a time, so they are this test's waiters.
func gateWaits(t *testing.T, db *testdb.DB) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND STATE = 'User lock' AND INFO LIKE 'SELECT GET_LOCK(?, ?), RELEASE_LOCK(?)%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond until it holds, and fails the test after 20s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gateKept reports whether some session keeps key's gate.
func gateKept(t *testing.T, db *testdb.DB, table, key string) bool {
	t.Helper()
	var id sql.NullInt64
	if err := db.QueryRow(`SELECT IS_USED_LOCK(?)`, locktable.GateName(table, key)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Valid
}

// TestGateWakesWaiters: on MariaDB a holder keeps its key's gate while it
// holds and lets go of it after the release, and a waiter in another
// Locker or another process blocks in the server on the gate and is woken
// by the release. The holder's lease outlives the test and the waiters'
// backoff reaches a minute, so only the gate can wake them in time. A
// waiter whose wait ends (its context, its Locker's Close) leaves no
// statement waiting on the server.
func TestGateWakesWaiters(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	table := privateTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(2*time.Minute))
	slow := []tablelock.Option{tablelock.WithTable(table), tablelock.WithMaxBackoff(time.Minute)}

	t.Run("kept while held", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the holder keeps its gate", func() bool { return gateKept(t, db, table, key) })
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the gate is let go after the release", func() bool { return !gateKept(t, db, table, key) })
	})

	t.Run("waiter elsewhere in this process", func(t *testing.T) {
		key := locktest.Key(t)
		waiter := newLocker(t, testdb.Fresh(t, sqllock.MariaDB, 0), slow...)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := acquireAndRelease(ctx, waiter, key)
		eventually(t, "the waiter blocks on the gate", func() bool { return gateWaits(t, db) == 1 })
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		served(t, got, "the waiter was not woken by the release")
	})

	t.Run("waiter in another process", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		cmd := testdb.Child(t, "TestGateWaiterChild", envGateChild+"="+table+"/"+key)
		out := make(chan error, 1)
		var output []byte
		go func() {
			var err error
			output, err = cmd.CombinedOutput()
			out <- err
		}()
		eventually(t, "the waiter process blocks on the gate", func() bool { return gateWaits(t, db) == 1 })
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-out:
			if err != nil {
				t.Fatalf("waiter process: %v\n%s", err, output)
			}
		case <-time.After(40 * time.Second):
			cmd.Process.Kill()
			<-out
			t.Fatal("the waiter process was not woken by the release")
		}
	})

	t.Run("cancelled and closed waiters leave no wait", func(t *testing.T) {
		key := locktest.Key(t)
		waiter, err := tablelock.New(testdb.Fresh(t, sqllock.MariaDB, 0).DB, sqllock.MariaDB, slow...)
		if err != nil {
			t.Fatal(err)
		}
		defer waiter.Close()
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release(ctx)

		wctx, wcancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(wctx, key)
			got <- err
		}()
		eventually(t, "the waiter blocks on the gate", func() bool { return gateWaits(t, db) == 1 })
		wcancel()
		if err := <-got; !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire = %v, want ErrNotAcquired and context.Canceled", err)
		}
		if n := gateWaits(t, db); n != 0 {
			t.Fatalf("a cancelled Acquire left %d gate waits on the server", n)
		}

		go func() {
			_, err := waiter.Acquire(ctx, key)
			got <- err
		}()
		eventually(t, "the waiter blocks on the gate again", func() bool { return gateWaits(t, db) == 1 })
		if err := waiter.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-got; !errors.Is(err, sqllock.ErrClosed) {
			t.Fatalf("Acquire cut off by Close = %v, want ErrClosed", err)
		}
		if n := gateWaits(t, db); n != 0 {
			t.Fatalf("a closed Locker left %d gate waits on the server", n)
		}
	})
}

const envGateChild = "TABLELOCK_GATE_CHILD"

// TestGateWaiterChild is the waiter process of TestGateWakesWaiters: it
// waits for table/key for 30s, less than the holder's TTL, with a backoff
// reaching a minute, and fails unless the gate lets it through.
func TestGateWaiterChild(t *testing.T) {
	v := os.Getenv(envGateChild)
	if v == "" {
		t.Skip("the child of TestGateWakesWaiters")
	}
	table, key, _ := strings.Cut(v, "/")
	db := testdb.Open(t, sqllock.MariaDB)
	l := newLocker(t, db, tablelock.WithTable(table), tablelock.WithMaxBackoff(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
