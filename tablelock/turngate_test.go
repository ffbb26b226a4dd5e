package tablelock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// turnGates counts the turn gates of this database (PostgreSQL advisory
// locks in the two-key space) held and waited for. The tests of this
// package run one at a time, so they are this test's.
func turnGates(t *testing.T, db *testdb.DB) (held, waiting int) {
	t.Helper()
	err := db.QueryRow(`SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2
AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&held, &waiting)
	if err != nil {
		t.Fatal(err)
	}
	return held, waiting
}

// turnLocker is a Locker on a pool of its own (a process of its own, as
// far as the server can tell) that hears no announcements and whose own
// pauses outlast the test: only its turn gate wakes it in time.
func turnLocker(t *testing.T, table string) *tablelock.Locker {
	t.Helper()
	db := testdb.Fresh(t, sqllock.Postgres, 0)
	return newLocker(t, db, tablelock.WithTable(table), tablelock.WithTTL(2*time.Minute),
		tablelock.WithNotify(false), tablelock.WithWaitBound(time.Minute), tablelock.WithMaxBackoff(time.Minute))
}

// acquireAsync runs Acquire of key in the background.
func acquireAsync(ctx context.Context, l *tablelock.Locker, key string) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		lease, err := l.Acquire(ctx, key)
		out <- acquired{lease, err}
	}()
	return out
}

type acquired struct {
	lease sqllock.Lease
	err   error
}

// turnLine is a key held by a Locker that keeps no gate (a), with b
// first in line (it keeps the gate, looking at the row) and c waiting in
// the server behind it.
type turnLine struct {
	db      *testdb.DB
	table   string
	key     string
	ctx     context.Context
	a       sqllock.Lease
	b, c    <-chan acquired
	cancelC context.CancelFunc // ends c's wait
}

// gatedLine sets up a turnLine on a table of the test's own.
func gatedLine(t *testing.T) *turnLine {
	t.Helper()
	db := testdb.Open(t, sqllock.Postgres)
	l := &turnLine{db: db, table: privateTable(t, db), key: locktest.Key(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cctx, cancelC := context.WithCancel(ctx)
	l.ctx, l.cancelC = ctx, cancelC
	plain := newLocker(t, db, tablelock.WithTable(l.table), tablelock.WithTTL(2*time.Minute), tablelock.WithTurnGates(false))
	a, err := plain.Acquire(ctx, l.key)
	if err != nil {
		t.Fatal(err)
	}
	l.a = a
	l.b = acquireAsync(ctx, turnLocker(t, l.table), l.key)
	eventually(t, "the first waiter keeps the gate", func() bool { h, _ := turnGates(t, db); return h == 1 })
	l.c = acquireAsync(cctx, turnLocker(t, l.table), l.key)
	eventually(t, "the second waits in the server", func() bool { _, w := turnGates(t, db); return w == 1 })
	return l
}

// pass releases a's lease and returns b's, taken through the gate b
// kept first in line.
func (l *turnLine) pass(t *testing.T) sqllock.Lease {
	t.Helper()
	if err := l.a.Release(l.ctx); err != nil {
		t.Fatal(err)
	}
	b := <-l.b // it looks at the row while first in line
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.lease
}

// TestTurnGateHandsOver: on PostgreSQL a waiter in another process waits
// in the server at the key's turn gate, and the holder's release lets it
// through at once. The waiters hear no announcements and their own pauses
// outlast the test, so only the gate can wake the second in time; the
// holder that took through the gate keeps it while it holds, and nothing
// stays held once every lease is released.
func TestTurnGateHandsOver(t *testing.T) {
	l := gatedLine(t)
	b := l.pass(t)
	if h, w := turnGates(t, l.db); h != 1 || w != 1 {
		t.Fatalf("while the first waiter holds: %d gates held, %d waited for; want 1, 1", h, w)
	}
	select {
	case r := <-l.c:
		t.Fatalf("the second waiter got through while the key was held: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	released := time.Now()
	if err := b.Release(l.ctx); err != nil {
		t.Fatal(err)
	}
	c := <-l.c
	if c.err != nil {
		t.Fatal(c.err)
	}
	if d := time.Since(released); d > 5*time.Second {
		t.Fatalf("the gate let the second waiter through %v after the release", d)
	}
	if c.lease.Token() <= b.Token() {
		t.Fatalf("token %d after %d", c.lease.Token(), b.Token())
	}
	if err := c.lease.Release(l.ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no gate kept once every lease is released", func() bool { h, w := turnGates(t, l.db); return h == 0 && w == 0 })
}

// TestTurnGateCancel: a waiter cancelled while it waits at the gate
// returns at once, leaves nothing waiting in the server, and takes
// nothing: the key goes on to the others, and is free after them.
func TestTurnGateCancel(t *testing.T) {
	l := gatedLine(t)
	start := time.Now()
	l.cancelC()
	c := <-l.c
	if !errors.Is(c.err, sqllock.ErrNotAcquired) || !errors.Is(c.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", c.err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("cancelled waiter returned after %v", d)
	}
	eventually(t, "the cancelled wait ends in the server", func() bool { _, w := turnGates(t, l.db); return w == 0 })
	if err := l.pass(t).Release(l.ctx); err != nil {
		t.Fatal(err)
	}
	d, err := newLocker(t, l.db, tablelock.WithTable(l.table)).TryAcquire(l.ctx, l.key)
	if err != nil {
		t.Fatalf("after every holder released: %v", err)
	}
	d.Release(l.ctx)
}

// TestTurnGateSessionKilled: the session that keeps a holder's gate is
// killed on the server. The row stays the holder's: its lease goes on,
// nobody else takes the key, and its release still frees it.
func TestTurnGateSessionKilled(t *testing.T) {
	l := gatedLine(t)
	b := l.pass(t)
	var killed int
	err := l.db.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("killed %d gate sessions: %v", killed, err)
	}
	// The second waiter is let through the gate, and finds the key held.
	select {
	case r := <-l.c:
		t.Fatalf("a waiter took the key of a holder whose gate session died: %v", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := b.Err(); err != nil {
		t.Fatalf("the holder's lease ended with its gate session: %v", err)
	}
	if err := b.Release(l.ctx); err != nil {
		t.Fatalf("release after the gate session died: %v", err)
	}
	c := <-l.c
	if c.err != nil {
		t.Fatal(c.err)
	}
	c.lease.Release(l.ctx)
}

// TestTurnGateMutualExclusion: Lockers on pools of their own contend for
// one key, taking it through its turn gate; a shared counter, touched
// only under the lock, proves that no two ever held it at once (-race
// sees any overlap), and the gate is seen in use.
func TestTurnGateMutualExclusion(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const lockers, turns = 6, 25
	key := locktest.Key(t)
	var (
		counter int
		inside  atomic.Int32
		wg      sync.WaitGroup
		seen    atomic.Bool
	)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			var n int
			_ = db.QueryRow(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND NOT granted`).Scan(&n)
			if n > 0 {
				seen.Store(true)
			}
		}
	}()
	for range lockers {
		l := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), tablelock.WithTable(table))
		wg.Go(func() {
			for range turns {
				lease, err := l.Acquire(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				counter++
				time.Sleep(time.Duration(counter%3) * time.Millisecond)
				inside.Add(-1)
				if err := lease.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	if counter != lockers*turns {
		t.Fatalf("counter %d, want %d", counter, lockers*turns)
	}
	if !seen.Load() {
		t.Fatal("no waiter ever waited at the turn gate")
	}
}

// TestTurnGateStaleHolder: a holder whose row is no longer its own (here
// expired by hand, as a pause past its lease would leave it) still keeps
// its gate, on a session that lives on. A waiter behind that gate waits
// at most the wait bound, then finds the row free and takes it with a
// larger token; the stale holder learns of its loss, and its release
// frees nothing and lets go of the gate.
func TestTurnGateStaleHolder(t *testing.T) {
	l := gatedLine(t)
	db, table, key, ctx := l.db, l.table, l.key, l.ctx
	b := l.pass(t)
	l.cancelC() // the waiter behind the gate: this test's comes next
	if c := <-l.c; c.err == nil {
		t.Fatalf("a waiter took the key from its live holder")
	}
	eventually(t, "the cancelled wait ends in the server", func() bool { _, w := turnGates(t, db); return w == 0 })
	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), tablelock.WithTable(table), tablelock.WithNotify(false))
	dc := acquireAsync(ctx, waiter, key)
	eventually(t, "the waiter waits at the stale holder's gate", func() bool { _, w := turnGates(t, db); return w == 1 })
	if _, err := db.Exec(`UPDATE `+table+` SET expires_at = now() WHERE lock_key = $1`, key); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := <-dc
	if r.err != nil {
		t.Fatal(r.err)
	}
	d := r.lease
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the waiter behind a stale gate took the key %v after it expired", took)
	}
	if d.Token() <= b.Token() {
		t.Fatalf("token %d after the stale holder's %d", d.Token(), b.Token())
	}
	if err := b.(sqllock.Extender).Extend(ctx, time.Minute); !errors.Is(err, sqllock.ErrLockLost) {
		t.Fatalf("the stale holder's extend: %v", err)
	}
	if err := b.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
		t.Fatalf("the stale holder's release: %v", err)
	}
	if err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no gate kept once every lease is released", func() bool { h, w := turnGates(t, db); return h == 0 && w == 0 })
}
