package tablelock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// TestRelistenWakesWaiters: while the listening connection is down, a
// release's NOTIFY goes unheard. A waiter sleeps until its holder's lease
// would expire unless woken, so once LISTEN is back in place every waiter
// must look again: else a release in the gap costs it the holder's whole
// remaining TTL (here a minute).
func TestRelistenWakesWaiters(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A table of its own: its channel, and so its listening session, is
	// this test's alone.
	table := fmt.Sprintf("tl_relisten_%x", rand.Uint64())
	if err := tablelock.CreateTable(ctx, db.DB, db.Dialect, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	// The holder, another process, does not listen: the waiter's listener
	// is the only session on the channel.
	holder := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute), tablelock.WithNotify(false))
	waiter := newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(time.Minute))
	relistening := make(chan struct{}, 10)
	proceed := make(chan struct{})
	tablelock.BeforeRelisten(waiter, func() {
		relistening <- struct{}{}
		<-proceed
	})

	key := locktest.Key(t)
	lease, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAndRelease(ctx, waiter, key)

	// The waiter's listening session, once it is in place.
	var pid int
	for pid == 0 {
		err := db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE 'LISTEN %' AND strpos(query, $1) > 0`, dialect.NotifyChannel(table)).Scan(&pid)
		if err != nil && ctx.Err() != nil {
			t.Fatalf("no session listens on %s: %v", dialect.NotifyChannel(table), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the waiter tried, was refused, sleeps
	if _, err := db.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	select {
	case <-relistening:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not reconnect after its session was terminated")
	}
	// The drop woke the waiter: it tried again, was refused, sleeps again.
	time.Sleep(200 * time.Millisecond)
	if err := lease.Release(ctx); err != nil { // its NOTIFY goes unheard
		t.Fatal(err)
	}
	close(proceed)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter still sleeps 5s after a release made while its listener reconnected")
	}
}
