package advisory_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestWatchArmedWhileHeld: a session that holds a lock has its socket
// watch look at everything that arrives while it is idle (the FATAL error
// a terminated session is sent before the server frees its locks), on the
// shared session and on a wait session alike; a session left holding
// nothing watches only for its close, so its next statement costs no
// change of the watch.
func TestWatchArmedWhileHeld(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := context.Background()
	l := newLocker(t, db)
	key := locktest.Key(t)
	want := func(what string, armed bool) {
		t.Helper()
		w, a := advisory.Armed(l, key)
		if !w || a != armed {
			t.Fatalf("%s: watched %v, armed %v; want watched, armed %v", what, w, a, armed)
		}
	}
	for range 2 {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want("holding", true)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		want("released", false)
	}

	// Granted on a wait session, after a wait in the server.
	other := newLocker(t, db)
	held, err := other.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan sqllock.Lease, 1)
	go func() {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	waitQueued(t, db, l, key, 1)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	if ids := advisory.WaitBackends(l); len(ids) == 0 {
		t.Fatal("the waiting Acquire pinned no wait session")
	}
	want("holding after a wait", true)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
