package locktable_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/internal/waiting"
)

// TestGrantCallsAfterCommit: in fair order a release that grants the row
// sends no NOTIFY in its own commit (a notifying commit holds a lock of
// the whole cluster through its WAL flush, so hot keys' grants would
// flush one at a time). It leaves the grant's calls in its session, and
// the calls' statement sends them there, once: only for that release
// (its key and token), and clears them either way.
func TestGrantCallsAfterCommit(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := context.Background()
	open := opener(t, db, locktable.Config{Table: newTable(t, db), Notify: true, Fair: true})
	a, b := open(), open()
	release, calls, channel, call := a.FairCalls()
	if release == "" {
		t.Fatal("a fair Table on PostgreSQL has no calls statement")
	}
	ln := b.Listener(waiting.NewQueue(waiting.Coalesce), slog.Default())
	t.Cleanup(ln.Close)
	const ttl = time.Minute
	g := ln.Expect("k", "w", "host-w", ttl)
	t.Cleanup(func() { ln.Unexpect(g) })
	h, err := a.Take(ctx, locktable.Claim{Key: "k", Owner: "h", Host: "host-h", TTL: ttl})
	if err != nil || !h.Won {
		t.Fatalf("holder's take = %+v, %v", h, err)
	}
	w, err := b.Take(ctx, locktable.Claim{Key: "k", Owner: "w", Host: "host-w", TTL: ttl, Listening: true, Entry: g.Entry})
	if err != nil || w.Won || !w.Queued {
		t.Fatalf("waiter's take = %+v, %v; want its entry queued", w, err)
	}

	// A session of its own listens on the grantee's call channel.
	heard := make(chan string, 4)
	lctx, stop := context.WithCancel(ctx)
	listening := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := db.Conn(lctx)
		if err != nil {
			listening <- err
			return
		}
		defer conn.Close()
		conn.Raw(func(dc any) error {
			c := dc.(interface{ Conn() *pgx.Conn }).Conn()
			_, err := c.Exec(lctx, "LISTEN "+pgx.Identifier{call + g.Entry.Caller}.Sanitize())
			listening <- err
			for err == nil {
				var n *pgconn.Notification
				if n, err = c.WaitForNotification(lctx); err == nil {
					heard <- n.Payload
				}
			}
			return driver.ErrBadConn // discarded, not pooled still listening
		})
	}()
	t.Cleanup(func() { stop(); <-done })
	if err := <-listening; err != nil {
		t.Fatal(err)
	}
	silent := func(what string) {
		t.Helper()
		select {
		case p := <-heard:
			t.Fatalf("%s: the grantee's channel heard %q; want nothing", what, p)
		case <-time.After(300 * time.Millisecond):
		}
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, release, "k", "h", h.Token, 0, channel, call); err != nil {
		t.Fatal(err)
	}
	var left string
	if err := tx.QueryRowContext(ctx, `SELECT current_setting('sqllock.calls')`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	var stash struct {
		Key      string
		Released int64
		Channels []string
		Payload  string
	}
	if err := json.Unmarshal([]byte(left), &stash); err != nil || stash.Key != "k" || stash.Released != h.Token ||
		len(stash.Channels) != 1 || stash.Channels[0] != call+g.Entry.Caller || !strings.HasPrefix(stash.Payload, "g{") {
		t.Fatalf("the release left %q (%v); want the grant's call to %q after release %d of k", left, err, call+g.Entry.Caller, h.Token)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	silent("the grant's commit")

	// Another session holds no calls, and a call left by another release
	// (another token) is not sent: either way nothing is, and it is
	// cleared.
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sent := func(c *sql.Conn, key string, token int64) int {
		t.Helper()
		var n int
		if err := c.QueryRowContext(ctx, calls, key, token).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := sent(other, "k", h.Token); n != 0 {
		t.Fatalf("a session the release did not run on sent %d calls; want none", n)
	}
	if _, err := other.ExecContext(ctx, `SELECT set_config('sqllock.calls', $1, false)`, left); err != nil {
		t.Fatal(err)
	}
	if n := sent(other, "k", h.Token+1); n != 0 {
		t.Fatalf("calls left by release %d sent for release %d: %d; want none", h.Token, h.Token+1, n)
	}
	var cleared string
	if err := other.QueryRowContext(ctx, `SELECT current_setting('sqllock.calls')`).Scan(&cleared); err != nil || cleared != "" {
		t.Fatalf("calls left after the calls' statement: %q, %v; want them cleared", cleared, err)
	}
	silent("calls of no release of this session")

	if n := sent(conn, "k", h.Token); n != 1 {
		t.Fatalf("the releasing session sent %d calls; want the grantee's one", n)
	}
	select {
	case p := <-heard:
		if p != stash.Payload {
			t.Fatalf("the grantee heard %q; want %q", p, stash.Payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the grantee heard nothing of its grant")
	}
	if n := sent(conn, "k", h.Token); n != 0 {
		t.Fatalf("the calls were sent again: %d; want once", n)
	}
	silent("the calls' second statement")
}
