package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// syncBuilder collects a watch's output while it runs.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatch: --watch redraws the held locks with their holder, token,
// held-for and expires-in; on PostgreSQL it also shows a rowlock waiter
// blocked behind a holder, and the tablelock waiter's listening session.
func TestWatch(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		src, err := openSource(ctx, db.DB, db.Dialect, tablelock.DefaultTable, false)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		key := fmt.Sprintf("watch/%x", rand.Uint64())
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)

		var waiting []string
		if db.Dialect == sqllock.Postgres {
			// A tablelock Acquire and a rowlock Acquire, each blocked.
			wctx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			defer func() { stop(); wg.Wait() }()
			wg.Go(func() { _, _ = l.Acquire(wctx, key) })
			rl, err := rowlock.New(db.DB, db.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Close()
			rkey := fmt.Sprintf("watch-row/%x", rand.Uint64())
			held, err := rl.Acquire(ctx, rkey)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			wg.Go(func() { _, _ = rl.Acquire(wctx, rkey) })
			waiting = []string{"sessions waiting for a lock", "session(s) listening for tablelock releases"}
		}

		out := &syncBuilder{}
		e := env{stdout: out, stderr: io.Discard, getenv: func(string) string { return "" }}
		tg := target{dialect: db.Dialect, display: "the test database"}
		all, _ := parseKinds(strings.Join(allKinds, ","))
		w := watchSpec{table: tablelock.DefaultTable, namespace: advisory.DefaultNamespace, every: 100 * time.Millisecond, kinds: all}
		// Frames until the waiters show (they block a moment after starting).
		deadline := time.Now().Add(30 * time.Second)
		for {
			out.b.Reset()
			w.frames = 2
			if err := watchLocks(ctx, e, tg, src, w); err != nil {
				t.Fatal(err)
			}
			seen := true
			for _, s := range waiting {
				seen = seen && strings.Contains(out.String(), s)
			}
			if seen || time.Now().After(deadline) {
				break
			}
		}
		got := out.String()
		t.Logf("watch output:\n%s", got)
		if n := strings.Count(got, "sqllock locks on the test database at"); n != 2 {
			t.Errorf("%d frames, want 2:\n%s", n, got)
		}
		want := append([]string{"HOLDER HOST/PID", "EXPIRES IN", key, fmt.Sprint(lease.Token()), lease.(*tablelock.Lease).Owner()}, waiting...)
		for _, s := range want {
			if !strings.Contains(got, s) {
				t.Errorf("watch output lacks %q:\n%s", s, got)
			}
		}
		// Expires in: the TTL less what passed, on the database clock.
		for line := range strings.Lines(got) {
			if strings.HasPrefix(line, key) && !strings.Contains(line, "59.") && !strings.Contains(line, "58.") && !strings.Contains(line, "1m0s") {
				t.Errorf("expires-in of a 1m lease taken just now is not about a minute: %q", line)
			}
		}
	})
}
