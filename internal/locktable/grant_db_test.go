package locktable_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/internal/waiting"
)

// TestGrantTakenOnce: in fair order the release grants the row to the
// entry queued first: its owner holds it, one hold, under a larger token.
// The grantee's own take then takes that hold as its own (Accept), still
// one hold, and clears the grant, so its next take counts one hold more; a
// take that may not accept counts the grant's hold as a reentrant one. A
// grant nobody took is given back (Leave), and the key is free; one under
// a token the caller still uses is not.
func TestGrantTakenOnce(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	ctx := context.Background()
	open := opener(t, db, locktable.Config{Table: newTable(t, db), Notify: true, Fair: true})
	a, b := open(), open()
	ln := b.Listener(waiting.NewQueue(waiting.Coalesce), slog.Default())
	t.Cleanup(ln.Close)
	const ttl = time.Minute
	holder := locktable.Claim{Key: "k", Owner: "h", Host: "host-h", TTL: ttl}
	row := func() locktable.Info {
		t.Helper()
		infos, err := a.List(ctx)
		if err != nil || len(infos) != 1 {
			t.Fatalf("List = %v, %v; want the one live row", infos, err)
		}
		return infos[0]
	}
	// grant has a hold the holder, queues w's entry and releases: the
	// row is granted to w.
	grant := func(g *locktable.Grant) (before, after int64) {
		t.Helper()
		h, err := a.Take(ctx, holder)
		if err != nil || !h.Won {
			t.Fatalf("holder's take = %+v, %v", h, err)
		}
		w, err := b.Take(ctx, locktable.Claim{Key: "k", Owner: "w", Host: "host-w", TTL: ttl, Listening: true, Entry: g.Entry})
		if err != nil || w.Won || !w.Queued || w.Token != h.Token {
			t.Fatalf("waiter's take = %+v, %v; want refused by the holder's token %d, its entry queued", w, err, h.Token)
		}
		if err := a.Release(ctx, "k", "h", h.Token, 0); err != nil {
			t.Fatal(err)
		}
		r := row()
		if r.Owner != "w" || r.Host != "host-w" || r.Holds != 1 || r.Token <= h.Token {
			t.Fatalf("after the release the row is %+v; want it granted to w, one hold, a token above %d", r, h.Token)
		}
		return h.Token, r.Token
	}

	g := ln.Expect("k", "w", "host-w", ttl)
	seen, granted := grant(g)
	claim := locktable.Claim{Key: "k", Owner: "w", Host: "host-w", TTL: ttl, Listening: true, Entry: g.Entry, Accept: true, Above: seen}
	got, err := b.Take(ctx, claim)
	if err != nil || !got.Won || got.Holds != 1 || got.Token != granted {
		t.Fatalf("the grantee's take = %+v, %v; want the grant taken as its own: won, token %d, one hold", got, err, granted)
	}
	if got, err = b.Take(ctx, claim); err != nil || !got.Won || got.Holds != 2 {
		t.Fatalf("the grantee's next take = %+v, %v; want one hold more", got, err)
	}
	for range 2 {
		if err := b.Release(ctx, "k", "w", granted, 0); err != nil {
			t.Fatal(err)
		}
	}
	ln.Unexpect(g)

	g = ln.Expect("k", "w", "host-w", ttl)
	_, granted = grant(g)
	claim = locktable.Claim{Key: "k", Owner: "w", Host: "host-w", TTL: ttl, Listening: true, Entry: g.Entry}
	if got, err := b.Take(ctx, claim); err != nil || !got.Won || got.Holds != 2 {
		t.Fatalf("a take that may not accept, on a row granted to its owner = %+v, %v; want one hold more", got, err)
	}
	if err := b.Release(ctx, "k", "w", granted, 0); err != nil {
		t.Fatal(err)
	}
	// The grant's hold is left. Leaving above its token (a hold still in
	// use) leaves it alone; below, it is given back.
	if left, err := b.Leave(ctx, "k", g, granted); err != nil || left {
		t.Fatalf("Leave above the grant's token = %v, %v; want nothing given back", left, err)
	}
	if r := row(); r.Owner != "w" || r.Holds != 1 {
		t.Fatalf("after a Leave above its token the row is %+v; want it still w's", r)
	}
	if left, err := b.Leave(ctx, "k", g, 0); err != nil || !left {
		t.Fatalf("Leave = %v, %v; want the grant given back", left, err)
	}
	if infos, err := a.List(ctx); err != nil || len(infos) != 0 {
		t.Fatalf("after the grant was given back List = %+v, %v; want the key free", infos, err)
	}
}
