package tablelock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/sqlutil"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// listener is a session LISTENing on a lock table's channel, as another
// process's waiters would.
type listener struct {
	conn *sql.Conn
	ch   string
}

func listen(t *testing.T, db *testdb.DB, table string) *listener {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ln := &listener{conn: conn, ch: sqlutil.NotifyChannel(table)}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "LISTEN "+pgx.Identifier{ln.ch}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return ln
}

// next returns the payload of the next announcement on the channel.
func (ln *listener) next(t *testing.T, within time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var payload string
	err := ln.conn.Raw(func(dc any) error {
		n, err := dc.(interface{ Conn() *pgx.Conn }).Conn().WaitForNotification(ctx)
		if err == nil {
			payload = n.Payload
		}
		return err
	})
	if err != nil {
		t.Fatalf("no announcement on %s within %v: %v", ln.ch, within, err)
	}
	return payload
}

// nothingBefore checks that nothing was announced before now: a marker
// sent by another session, whose commit comes after everything the test
// did, must be the next announcement (they are delivered in commit order).
func (ln *listener) nothingBefore(t *testing.T, db *testdb.DB) {
	t.Helper()
	marker := fmt.Sprintf("marker-%x", rand.Uint64())
	if _, err := db.Exec("SELECT pg_notify($1, $2)", ln.ch, marker); err != nil {
		t.Fatal(err)
	}
	if got := ln.next(t, 10*time.Second); got != marker {
		t.Fatalf("announced %q with no waiter; want nothing before the marker", got)
	}
}

// waitWanted returns once a refused claim has marked key's row: a waiter
// tried and sleeps.
func waitWanted(t *testing.T, db *testdb.DB, table, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var wanted bool
		err := db.QueryRow("SELECT wanted FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1", key).Scan(&wanted)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if wanted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no waiter marked %q wanted", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// privateTable makes a lock table of the test's own: its channel is the
// test's alone.
func privateTable(t *testing.T, db *testdb.DB) string {
	t.Helper()
	table := fmt.Sprintf("tl_notify_%x", rand.Uint64())
	if err := tablelock.CreateTable(context.Background(), db.DB, db.Dialect, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	return table
}

// TestReleaseAnnouncesOnlyWanted: on PostgreSQL a release announces its
// key only when a claim was refused under its holder. A NOTIFY queued by a
// transaction takes a database-wide lock at its commit, so releases nobody
// waits for must not send one. A waiter, in this process or another, is
// still woken: the lease outlives the test, so only the announcement can
// wake it in time.
func TestReleaseAnnouncesOnlyWanted(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	ln := listen(t, db, table)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(2*time.Minute))

	t.Run("no waiter", func(t *testing.T) {
		key := locktest.Key(t)
		owned := sqllock.WithOwner(ctx, "notify-owner")
		for range 3 {
			a, err := holder.Acquire(owned, key)
			if err != nil {
				t.Fatal(err)
			}
			b, err := holder.Acquire(owned, key) // reentrant
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// A try refused by this process's own holder marks the row: its
		// release is announced, and the next holder starts unmarked.
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		ln.nothingBefore(t, db)
		if _, err := holder.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held key: %v", err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := ln.next(t, 10*time.Second); got != key {
			t.Fatalf("announced %q, want %q", got, key)
		}
		a, err = holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		ln.nothingBefore(t, db)
	})

	t.Run("waiter elsewhere in this process", func(t *testing.T) {
		key := locktest.Key(t)
		// Another pool and Locker: as far as the database can tell, another
		// process.
		waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), tablelock.WithTable(table), tablelock.WithTTL(2*time.Minute))
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := waiter.Acquire(ctx, key)
			if err == nil {
				err = l.Release(context.Background())
			}
			got <- err
		}()
		waitWanted(t, db, table, key)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if p := ln.next(t, 10*time.Second); p != key {
			t.Fatalf("announced %q, want %q", p, key)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the waiter was not woken by the release")
		}
	})

	t.Run("waiter in another process", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		cmd := testdb.Child(t, "TestNotifyWaiterChild", envNotifyChild+"="+table+"/"+key)
		out := make(chan error, 1)
		var output []byte
		go func() {
			var err error
			output, err = cmd.CombinedOutput()
			out <- err
		}()
		waitWanted(t, db, table, key)
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
}

const envNotifyChild = "TABLELOCK_NOTIFY_CHILD"

// TestNotifyWaiterChild is the waiter process of TestReleaseAnnouncesOnlyWanted:
// it waits for table/key for 30s, less than the holder's TTL, and fails
// unless a release wakes it.
func TestNotifyWaiterChild(t *testing.T) {
	v := os.Getenv(envNotifyChild)
	if v == "" {
		t.Skip("the child of TestReleaseAnnouncesOnlyWanted")
	}
	table, key, _ := strings.Cut(v, "/")
	db := testdb.Open(t, sqllock.Postgres)
	l := newLocker(t, db, tablelock.WithTable(table))
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

// TestRefusalOnMarkedRowOnlyReads: once a refused claim has marked the
// holder's row, further refusals propose no row, so they take no row lock
// and write nothing (the row's xmax, set by a locker, stays as it was):
// under a hot key most tries are refusals, and each cost a locked row and
// a commit before.
func TestRefusalOnMarkedRowOnlyReads(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	ctx := context.Background()
	l := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute))
	key := locktest.Key(t)
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	state := func() (xmax string, wanted bool) {
		t.Helper()
		err := db.QueryRow("SELECT xmax::text, wanted FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1", key).Scan(&xmax, &wanted)
		if err != nil {
			t.Fatal(err)
		}
		return xmax, wanted
	}
	if _, wanted := state(); wanted {
		t.Fatal("a new holder's row is marked wanted")
	}
	if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key: %v", err)
	}
	before, wanted := state()
	if !wanted {
		t.Fatal("a refused claim did not mark the row")
	}
	for range 3 {
		if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held key: %v", err)
		}
	}
	if after, _ := state(); after != before {
		t.Errorf("refusals on a marked row locked it: xmax %s, then %s", before, after)
	}
}
