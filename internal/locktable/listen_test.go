package locktable_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/internal/waiting"
)

// TestWatch: every watcher of an announced payload is woken, no watcher
// of another; and after the listening session fails, every watcher is
// woken once it is back, since announcements in between went unheard.
func TestWatch(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := newTable(t, db)
	tbl := opener(t, db, locktable.Config{Table: name, Notify: true})()
	channel := dialect.NotifyChannel(name)
	ln := tbl.Listener(waiting.NewQueue(waiting.Coalesce), slog.New(slog.DiscardHandler))
	t.Cleanup(ln.Close)
	watch := func(p string) <-chan struct{} {
		w, stop, err := ln.Watch(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		return w
	}
	p1, p2, other, last := watch("p"), watch("p"), watch("q"), watch("r")
	wait := func(w <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatalf("%s never woken", what)
		}
	}
	pending := func(w <-chan struct{}) bool {
		select {
		case <-w:
			return true
		default:
			return false
		}
	}
	for _, p := range []string{"p", "r"} {
		if _, err := db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, p); err != nil {
			t.Fatal(err)
		}
	}
	wait(p1, "the first watcher of p")
	wait(p2, "the second watcher of p")
	wait(last, "the watcher of r")
	// r was announced after p, on one session: p's wake-ups are done.
	if pending(other) {
		t.Fatal("the watcher of q was woken by p")
	}

	// Fail the listening session: each watcher hears of it.
	var pid int
	if err := db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE 'LISTEN %' AND strpos(query, $1) > 0`, channel).Scan(&pid); err != nil {
		t.Fatalf("no session listens on %s: %v", channel, err)
	}
	if _, err := db.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	for what, w := range map[string]<-chan struct{}{"p": p1, "q": other, "r": last} {
		wait(w, "after the session failed, the watcher of "+what)
	}
}
