package locktable_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
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

	// A session of its own listens on the grantee's call channel, and on
	// a marker's: notifications arrive in commit order, so a marker sent
	// now comes first unless something was sent before it.
	heard, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		heard.Raw(func(any) error { return driver.ErrBadConn }) // not pooled still listening
		heard.Close()
	})
	grantee, marker := call+g.Entry.Caller, fmt.Sprintf("sqllock_test_marker_%x", rand.Uint64())
	for _, ch := range []string{grantee, marker} {
		if _, err := heard.ExecContext(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	next := func() *pgconn.Notification {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var n *pgconn.Notification
		err := heard.Raw(func(dc any) (err error) {
			n, err = dc.(interface{ Conn() *pgx.Conn }).Conn().WaitForNotification(wctx)
			return err
		})
		if err != nil {
			t.Fatalf("nothing heard within 5s: %v", err)
		}
		return n
	}
	silent := func(what string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, marker, what); err != nil {
			t.Fatal(err)
		}
		if n := next(); n.Channel != marker {
			t.Fatalf("%s: the grantee's channel heard %q; want nothing", what, n.Payload)
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
		len(stash.Channels) != 1 || stash.Channels[0] != grantee || !strings.HasPrefix(stash.Payload, "g{") {
		t.Fatalf("the release left %q (%v); want the grant's call to %q after release %d of k", left, err, grantee, h.Token)
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
	if n := next(); n.Channel != grantee || n.Payload != stash.Payload {
		t.Fatalf("heard %q on %s; want the grant %q on the grantee's channel", n.Payload, n.Channel, stash.Payload)
	}
	if n := sent(conn, "k", h.Token); n != 0 {
		t.Fatalf("the calls were sent again: %d; want once", n)
	}
	silent("the calls' second statement")
}
