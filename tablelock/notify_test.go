package tablelock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// listener is a session LISTENing on a lock table's channels, as another
// process's waiters would: announcements to all, and (hear) the calls of
// the Lockers it is told to hear.
type listener struct {
	conn   *sql.Conn
	ch     string
	call   string // the start of every Locker's call channel
	callee string // the Locker the last call heard by next called
	// granted: that call was a grant (fair order); next returned its
	// whole payload, which ends with the key.
	granted bool
}

func listen(t *testing.T, db *testdb.DB, table string) *listener {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ln := &listener{conn: conn, ch: dialect.NotifyChannel(table), call: dialect.CallChannel(table)}
	t.Cleanup(func() {
		// Out of the pool: a later borrower would hear this test's channels.
		conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
	})
	if _, err := conn.ExecContext(context.Background(), "LISTEN "+pgx.Identifier{ln.ch}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return ln
}

// hear makes ln hear the calls of the Locker whose id is queued: only that
// Locker's session hears them, and the copies sent to the two queued next.
func (ln *listener) hear(t *testing.T, id string) {
	t.Helper()
	if _, err := ln.conn.ExecContext(context.Background(), "LISTEN "+pgx.Identifier{ln.call + id}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

// next returns the key of the next announcement or call; after a call,
// ln.callee is the id of the Locker called, else empty.
func (ln *listener) next(t *testing.T, within time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var payload string
	err := ln.conn.Raw(func(dc any) error {
		n, err := dc.(interface{ Conn() *pgx.Conn }).Conn().WaitForNotification(ctx)
		if err == nil {
			payload, ln.callee, ln.granted = n.Payload, "", false
			switch {
			case strings.HasPrefix(n.Channel, ln.call) && strings.HasPrefix(n.Payload, "g"):
				// A grant: "g" and the JSON of the token, the entry
				// (a sqllock_waiter) and the key.
				var g struct {
					Entry struct{ Caller string }
					Key   string
				}
				if err := json.Unmarshal([]byte(n.Payload[1:]), &g); err != nil {
					return fmt.Errorf("grant %q: %w", n.Payload, err)
				}
				ln.granted, ln.callee, payload = true, g.Entry.Caller, g.Key
			case strings.HasPrefix(n.Channel, ln.call):
				ln.callee, payload = n.Payload[:16], n.Payload[16:]
			}
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
	if got := ln.next(t, 10*time.Second); got != marker || ln.callee != "" {
		t.Fatalf("announced %q with no waiter; want nothing before the marker", got)
	}
}

// waitQueued returns the ids queued in key's row once n waiting Lockers
// have queued there: each tried and sleeps.
func waitQueued(t *testing.T, db *testdb.DB, table, key string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		queued, err := queuedIn(db, table, key)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if len(queued) >= n {
			return queued
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters queued for %q", len(queued), n, key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// queuedIn returns the ids of the Lockers queued in key's row.
func queuedIn(db *testdb.DB, table, key string) ([]string, error) {
	var list string
	err := db.QueryRow("SELECT array_to_string(ARRAY(SELECT (waiters[i]).caller FROM generate_subscripts(waiters, 1) AS i ORDER BY i), ',') FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1", key).Scan(&list)
	if err != nil || list == "" {
		return nil, err
	}
	return strings.Split(list, ","), nil
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
		got := acquireAndRelease(ctx, waiter, key)
		queued := waitQueued(t, db, table, key, 1)
		ln.hear(t, queued[0])
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if p := ln.next(t, 10*time.Second); p != key || ln.callee != queued[0] {
			t.Fatalf("heard %q calling %q, want a call of %q for %q", p, ln.callee, queued[0], key)
		}
		served(t, got, "the waiter was not woken by the release")
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
		waitQueued(t, db, table, key, 1)
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

// TestReleaseCallsOneWaiter: on PostgreSQL a release calls the waiting
// Locker that queued first, alone, instead of waking every waiting Locker
// for one winner; the others sleep on, queued in order. A called Locker
// that no longer waits for the key announces it to everyone at once, and
// one that is gone (its process killed, or the Locker closed) is passed
// over by the others after a short grace: no waiter sleeps until the
// holder's lease would have ended (two minutes, past the test's deadline).
func TestReleaseCallsOneWaiter(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	ln := listen(t, db, table)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(2 * time.Minute)}
	holder := newLocker(t, db, opts...)
	// Each waiter is a Locker over a pool of its own, as another process.
	waiter := func() *tablelock.Locker { return newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...) }
	// wait starts an Acquire of key on l, whose outcome comes out of out
	// (buffered for every waiter sending to it); take returns the next
	// lease out of out, or fails the test. No goroutine touches t.
	type outcome struct {
		lease sqllock.Lease
		err   error
	}
	wait := func(l *tablelock.Locker, key string, out chan<- outcome) {
		go func() {
			lease, err := l.Acquire(ctx, key)
			out <- outcome{lease, err}
		}()
	}
	take := func(t *testing.T, out <-chan outcome) sqllock.Lease {
		t.Helper()
		select {
		case o := <-out:
			if o.err != nil {
				t.Fatal(o.err)
			}
			return o.lease
		case <-ctx.Done():
			t.Fatal("no waiter got the key")
		}
		return nil
	}

	t.Run("first queued alone", func(t *testing.T) {
		key := locktest.Key(t)
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		won := make(chan outcome, 3)
		for i := range 3 {
			wait(waiter(), key, won)
			waitQueued(t, db, table, key, i+1)
		}
		for i := range 3 {
			// Every waiter left is queued (it sleeps only then), and while
			// the key is held nobody leaves the queue.
			head := waitQueued(t, db, table, key, 3-i)[0]
			ln.hear(t, head)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// The release popped the head of the queue and called it.
			if k := ln.next(t, 10*time.Second); k != key || ln.callee != head {
				t.Fatalf("release %d: heard %q calling %q, want a call of %q for %q", i, k, ln.callee, head, key)
			}
			held = take(t, won)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		ln.nothingBefore(t, db)
	})

	t.Run("called Locker stopped waiting", func(t *testing.T) {
		key := locktest.Key(t)
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		quitter := waiter()
		qctx, qcancel := context.WithCancel(ctx)
		quit := make(chan error, 1)
		go func() {
			_, err := quitter.Acquire(qctx, key)
			quit <- err
		}()
		first := waitQueued(t, db, table, key, 1)[0]
		got := make(chan outcome, 1)
		wait(waiter(), key, got)
		waitQueued(t, db, table, key, 2)
		q := queueOf(t, db, table, key)
		ln.hear(t, first)
		qcancel()
		if err := <-quit; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
		// Its entry is called before it leaves the row.
		restoreQueue(t, db, table, key, q, 1)
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if k := ln.next(t, 10*time.Second); k != key || ln.callee != first {
			t.Fatalf("heard %q calling %q, want a call of %q for %q", k, ln.callee, first, key)
		}
		// The Locker called, still listening, hands the call on to all.
		if k := ln.next(t, 10*time.Second); k != key || ln.callee != "" {
			t.Fatalf("heard %q calling %q, want %q announced to all", k, ln.callee, key)
		}
		if err := take(t, got).Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	// passedOver: the gone Lockers that start queues first, then end makes
	// go away without a word; the release calls the first, nobody answers
	// for it, and the waiter queued after them takes the key by itself
	// after the grace.
	passedOver := func(t *testing.T, gone int, start func(key string), end func()) {
		key := locktest.Key(t)
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		start(key)
		first := waitQueued(t, db, table, key, gone)[0]
		got := make(chan outcome, 1)
		wait(waiter(), key, got)
		waitQueued(t, db, table, key, gone+1)
		ln.hear(t, first)
		end()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if k := ln.next(t, 10*time.Second); k != key || ln.callee != first {
			t.Fatalf("heard %q calling %q, want a call of %q for %q", k, ln.callee, first, key)
		}
		lease := take(t, got)
		ln.nothingBefore(t, db)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("called Locker killed", func(t *testing.T) {
		var child *exec.Cmd
		passedOver(t, 1, func(key string) {
			child = testdb.Child(t, "TestNotifyWaiterChild", envNotifyChild+"="+table+"/"+key)
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
		}, func() {
			child.Process.Kill() // kill -9 of a process queued first
			child.Wait()
		})
	})

	// goneQueued queues n Lockers in turn, and closes them at end: Close
	// ends each Acquire and listening session; the test then puts the
	// Lockers back in the row, as a crash would leave them.
	goneQueued := func(t *testing.T, n int) (start func(key string), end func()) {
		var ls []*tablelock.Locker
		quit := make(chan outcome, n)
		var key string
		return func(k string) {
				key = k
				for i := range n {
					ls = append(ls, waiter())
					wait(ls[i], key, quit)
					waitQueued(t, db, table, key, i+1)
				}
			}, func() {
				q := queueOf(t, db, table, key)
				for _, l := range ls {
					l.Close()
					if o := <-quit; !errors.Is(o.err, sqllock.ErrClosed) {
						t.Fatalf("Acquire on a closed Locker: %v", o.err)
					}
				}
				restoreQueue(t, db, table, key, q, 1)
			}
	}

	t.Run("called Locker gone", func(t *testing.T) {
		start, end := goneQueued(t, 1)
		passedOver(t, 1, start, end)
	})

	// The copy of the call also goes to the Locker queued after next.
	t.Run("called Locker and the next gone", func(t *testing.T) {
		start, end := goneQueued(t, 2)
		passedOver(t, 2, start, end)
	})
}
