// Package locktable is the expiring-row engine under tablelock, jobguard and
// the reaper: a key is held while its row in a lock table names an owner
// and an expiry ahead of the database clock.
//
// The engine owns every statement about such a row: take it when it is
// free or expired (or held by the same owner, one hold more) with a fresh
// fencing token, renew it, give a hold back, free it for an operator, list
// and reap the rows. Each dialect's statements, their arguments and how
// their results are read live in its store_<dialect>.go file, which
// registers itself; the rest of the package, and its users, never ask which
// dialect they are on. The policies stay with the users: tablelock's
// renewal and waiting, jobguard's hold-at-most and hold-at-least, the
// reaper's schedule.
//
// Every time comparison runs on the database clock, inside the statement.
// A statement reads that clock once, when it starts, so a freed row
// expires when its last hold began (acquired_at), not when it was freed:
// a take that began while the key was held, and waited on the release's
// row lock, then finds the row free instead of held for the moments
// between its start and the release's.
package locktable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

// Config describes one lock table.
type Config struct {
	// Table is the table's name, optionally schema-qualified; it is
	// validated and quoted.
	Table string
	// Notify: the statements that free a key announce it to other
	// sessions where the dialect can (PostgreSQL NOTIFY on the table's
	// channel), so that their waiters look again at once.
	Notify bool
	// AsyncCommit: the statements of a lease (take, renew, release) commit
	// without waiting for the WAL flush, where the dialect can (PostgreSQL
	// synchronous_commit = off for those statements only).
	AsyncCommit bool
	// Fair: waiters queue an entry each in the row, and the release
	// grants the row to the first (see Grant), in the order they queued
	// (where the dialect queues waiters: PostgreSQL; elsewhere Open
	// refuses it). It needs Notify, and claimants that listen
	// (Claim.Listening) with an entry (Claim.Entry).
	Fair bool
	// Unprepared: statements run unprepared (stmtcache.Cache.Direct), for
	// a transaction-pooling proxy.
	Unprepared bool
	// Freed, when set, is called with a key that the engine gave back by
	// itself (the give-back of a detached take whose caller had gone), so
	// that the caller's waiters in this process look again.
	Freed func(key string)
	// SingleWriter: every statement reaches one node of a Galera cluster
	// (the strategies' WithSingleWriter), so a multi-writer cluster is
	// served.
	SingleWriter bool
	// TurnGates: a waiter may wait for a key at its turn gate (GateTake),
	// where the Table can (TurnGates).
	TurnGates bool
}

// Table is one lock table. It is safe for concurrent use. Close it when done.
type Table struct {
	h   handle
	st  store
	cfg Config
	d   sqllock.Dialect
	srv *server.Check // nil where the dialect probes no server
	id  string        // callerLen hex digits: whom a release calls (Claim.Listening)
	// inline: a take may run on its caller's goroutine under a context
	// that can end, since the driver ends it at once then (interrupter).
	inline bool
	gates  *turnGates // nil where keys have no turn gates (TurnGates)

	mu     sync.Mutex
	closed bool
	bg     sync.WaitGroup // detached takes and their give-backs
	work   *workers       // where detached takes run
	live   map[int]string // Live's statement, by number of keys
	// turns: the last detached statement that queues or leaves (a take
	// of a claimant that listens, a leave) of each key, closed when it
	// ends: the next waits for it (serial).
	turns map[string]chan struct{}
	// calls: in the default order, the keys whose row may queue the
	// Table's own entry (a claimant that listens was refused, or its take
	// is in flight), for LeaveCalls and Close.
	calls map[string]*called
}

// called is where the Table's own entry stands in one key's row.
type called struct {
	inflight int  // takes in flight that may queue it
	takes    int  // takes begun, ever: a leave forgets the key only if none began beside it
	queued   bool // a take may have queued it, and no leave ran since
}

// errClosed: a detached take was asked of a closed Table.
var errClosed = fmt.Errorf("%w: its lock table is closed", sqllock.ErrClosed)

// Open returns the Table cfg names on db for dialect d. It does not touch
// the database.
func Open(db *sql.DB, d sqllock.Dialect, cfg Config) (*Table, error) {
	st, err := newStore(d, cfg)
	if err != nil {
		return nil, err
	}
	t := &Table{h: handle{DB: db, stmts: &stmtcache.Cache{Direct: cfg.Unprepared}}, st: st, cfg: cfg, d: d,
		srv: server.New(db, d, cfg.SingleWriter), id: fmt.Sprintf("%0*x", callerLen, rand.Uint64()), work: newWorkers(),
		inline: interrupts(st, db)}
	if _, ok := st.(*postgresStore); ok && cfg.TurnGates && !cfg.Unprepared && !cfg.Fair {
		t.gates = &turnGates{b: budgetFor(db), slots: make(chan struct{}, maxGateWaits)}
	}
	return t, nil
}

// interrupter is a store whose driver, on some handles, ends a statement
// the moment its context ends, a wait for a lock included, and leaves
// nothing behind unless the statement had already done its work.
type interrupter interface {
	interrupts(db *sql.DB) bool
}

// interrupts reports whether st's driver on db ends statements so.
func interrupts(st store, db *sql.DB) bool {
	in, ok := st.(interrupter)
	return ok && in.interrupts(db)
}

// newStore builds d's store for the table cfg names.
func newStore(d sqllock.Dialect, cfg Config) (store, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("%w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	open, ok := stores[d]
	if !ok {
		return nil, fmt.Errorf("%w: dialect %v has no lock table", sqllock.ErrUnsupported, d)
	}
	if cfg.Fair && !cfg.Notify {
		return nil, fmt.Errorf("%w: fair order needs the release to call the next waiter (Notify)", sqllock.ErrInvalidOption)
	}
	t, err := dialect.QuoteIdent(d, cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	// The index name must be unique per schema on PostgreSQL and SQLite.
	idx, err := dialect.QuoteIdent(d, strings.ReplaceAll(cfg.Table, ".", "_")+"_expires_at")
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	st := open(names{table: t, index: idx, channel: dialect.NotifyChannel(cfg.Table), call: dialect.CallChannel(cfg.Table)}, cfg)
	if _, ok := st.(queuer); cfg.Fair && !ok {
		return nil, fmt.Errorf("%w: fair order on %v: its lock table keeps no queue of waiters to serve in order (PostgreSQL's does)", sqllock.ErrUnsupported, d)
	}
	return st, nil
}

// Schema returns the DDL of a lock table named table for d: the table
// migration 00001 leaves under sqllock_locks and 00007 turns sqllock_jobs
// into.
func Schema(d sqllock.Dialect, table string) (string, error) {
	st, err := newStore(d, Config{Table: table})
	if err != nil {
		return "", err
	}
	return st.sql().ddl, nil
}

// CreateTable creates a lock table named table for d (see Schema). The
// fencing sequence comes from the migrations alone.
func CreateTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, table string) error {
	ddl, err := Schema(d, table)
	if err != nil {
		return err
	}
	if err := dialect.ExecScript(ctx, db, ddl); err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	return nil
}

// Close waits for the give-backs of detached takes and the leaves, takes
// the Table's own entry out of the rows that may still queue it (default
// order: LeaveCalls) and closes the prepared statements; statements asked
// for later are prepared for one use. It never closes the *sql.DB, and is
// idempotent.
func (t *Table) Close() error {
	t.mu.Lock()
	again := t.closed
	t.closed = true
	t.mu.Unlock()
	t.bg.Wait() // each bounded by lease.ReleaseTimeout
	t.work.stop()
	t.leaveAll()
	if c, ok := t.st.(closer); ok {
		c.close()
	}
	if t.gates != nil && !again {
		t.gates.b.drop()
	}
	return t.h.stmts.Close()
}

// leaveAll takes the Table's own entry out of every row that may still
// queue it (default order), one statement a key, within one
// lease.ReleaseTimeout: a closed Table calls nobody, and a release that
// called it would keep the key from the waiters queued after it for a
// grace. No take runs any more.
func (t *Table) leaveAll() {
	t.mu.Lock()
	var keys []string
	for k, c := range t.calls {
		if c.queued {
			keys = append(keys, k)
		}
	}
	t.calls = nil
	t.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	q := t.st.(queuer) // only a queuer's takes queue the entry
	for _, k := range keys {
		if _, err := q.leave(ctx, t.h, k, t.callEntry()); err != nil && ctx.Err() != nil {
			return // those left are called once more, each costing its next waiter a grace
		}
	}
}

// Claim is one request for a key.
type Claim struct {
	Key   string
	Owner string // a row held by Owner is taken again, one hold more
	Host  string // recorded beside the owner, for operators
	TTL   time.Duration
	// ExpectFree: the caller expects the key to be free (a first try, or
	// one woken by a release), so a dialect that reads before it writes
	// to keep pollers off its write lock (SQLite) goes straight to the
	// write, and one with a cheaper take of a free row tries it first on
	// a quiet key (MariaDB, PostgreSQL: seenRows).
	ExpectFree bool
	// Fresh: Owner is new to this claim, so nobody else holds a row under
	// it, and a take whose outcome is unknown (cut off in flight) can be
	// given back by owner.
	Fresh bool
	// Listening: the claimant waits on the Table's Listener, subscribed
	// before this take, so a refusal may queue the Table in the row to be
	// called alone when the key is freed (where the dialect calls).
	Listening bool
	// Entry, in fair order, is the claimant's place in the queue
	// (Grant.Entry), queued by a refusal instead of the Table's id.
	Entry Entry
	// Accept, in fair order: a row granted to Entry under a token larger
	// than Above is taken as the claimant's own, the hold the grant gave
	// (Grant.Above); otherwise a row its owner holds gets one hold more.
	Accept bool
	Above  int64

	caller string // the Table's id (or Entry) when Listening
}

// Attempt is the outcome of one take.
type Attempt struct {
	Won   bool
	Token int64 // the fencing token: of the row taken, or of its holder
	Holds int64 // the row's hold count
	// Host is the holder's, when not won; empty when unknown.
	Host string
	// Remaining is how long the holder's row stays taken, when not won;
	// negative when unknown.
	Remaining time.Duration
	// HeldFor is how long the holder has held the row, when not won and
	// the dialect tells (where it has gates); 0 otherwise.
	HeldFor time.Duration
	// Queued: in fair order, the claimant's Entry is in the row's queue
	// after this take.
	Queued bool
}

// Take runs one take of c.Key: the row is taken when it is free or
// expired, with a new token larger than every earlier holder's, or gets
// one hold more when c.Owner holds it.
func (t *Table) Take(ctx context.Context, c Claim) (Attempt, error) {
	if err := t.srv.Check(ctx); err != nil {
		return Attempt{Remaining: -1}, err
	}
	if c.Listening {
		c.caller = t.id
		if t.cfg.Fair {
			c.caller = c.Entry.Caller
		}
	}
	calls := t.queuesCalls(c)
	if calls {
		t.takingCall(c.Key)
	}
	a, err := t.st.take(ctx, t.h, c)
	if calls {
		t.tookCall(c.Key, err == nil && a.Won)
	}
	if err != nil {
		return Attempt{Remaining: -1}, err
	}
	if a.Won {
		a.Host, a.Remaining = "", 0
	}
	return a, nil
}

// TakeDetached runs Take so that the caller's cancellation cannot cut it
// short on the server: a statement cancelled in flight can still commit
// (on MariaDB the driver closes its socket, which a statement waiting on a
// row lock does not notice; on PostgreSQL the answer may be on its way),
// and the row would then stay taken, for a TTL, by an owner nobody knows.
// So the statement runs under its own timeout (lease.ReleaseTimeout); a
// caller whose ctx ends first gets ctx.Err() at once, and whatever the
// statement won is given back, one hold, as soon as it returns. A take of a
// Fresh owner cut off with its outcome unknown is given back by owner too.
// Close waits for those give-backs. A ctx that cannot be cancelled runs
// inline, without a goroutine, and so does the take of a Fresh owner where
// the driver ends a statement at once when its ctx ends (modernc.org/sqlite,
// whose busy wait ends too): a take cut off with its outcome unknown is
// then given back by owner in the background. Handing the take to a
// worker cost about 30 µs of a 110 µs acquire and release on SQLite.
func (t *Table) TakeDetached(ctx context.Context, c Claim) (Attempt, error) {
	if ctx.Done() == nil {
		a, err := t.Take(ctx, c)
		if err != nil && c.Fresh && outcomeUnknown(err) {
			t.giveBack(c, 0)
		}
		return a, err
	}
	if t.inline && c.Fresh && c.Entry == (Entry{}) && !t.queuesCalls(c) {
		a, err := t.Take(ctx, c)
		if err != nil && outcomeUnknown(err) {
			if ctx.Err() == nil {
				t.giveBack(c, 0) // before a retry under the same owner
			} else {
				t.giveBackLater(c)
			}
		}
		return a, err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return Attempt{Remaining: -1}, errClosed
	}
	t.bg.Add(1)
	t.mu.Unlock()
	var mine chan struct{}
	if c.Entry != (Entry{}) || t.queuesCalls(c) {
		var err error
		if mine, err = t.waitTurn(ctx, c.Key); err != nil {
			t.bg.Done()
			return Attempt{Remaining: -1}, err
		}
	}
	type result struct {
		a   Attempt
		err error
	}
	done := make(chan result) // unbuffered: a result is either taken or given back
	gaveUp := make(chan struct{})
	t.work.run(func() {
		defer t.bg.Done()
		defer t.endTurn(c.Key, mine)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease.ReleaseTimeout)
		a, err := t.Take(sctx, c)
		cancel()
		if err != nil && c.Fresh && outcomeUnknown(err) {
			// Before the caller hears of it: it may try again under the
			// same owner, and this must not free what that try takes.
			t.giveBack(c, 0)
		}
		select {
		case done <- result{a, err}:
		case <-gaveUp:
			if err == nil && a.Won {
				t.giveBack(c, a.Token)
			}
		}
	})
	select {
	case r := <-done:
		return r.a, r.err
	case <-ctx.Done():
		close(gaveUp)
		return Attempt{Remaining: -1}, ctx.Err()
	}
}

// serial makes the statements of one key in a Table that queue an entry
// or leave the queue run one at a time: a take cut off while it waited for
// the row lock commits its refusal, which queues its entry, after its
// caller has gone, and a leave of the entry beside it would find nothing
// to take out. One at a time, the leave comes after the take; and the
// statements of Acquires cut off one after another do not pile up, a
// session each, on the row lock.
//
// waitTurn waits, within ctx, until no such statement of key runs, and
// takes the turn: the caller ends it with endTurn.
func (t *Table) waitTurn(ctx context.Context, key string) (chan struct{}, error) {
	for {
		t.mu.Lock()
		prev := t.turns[key]
		if prev == nil {
			mine := make(chan struct{})
			if t.turns == nil {
				t.turns = make(map[string]chan struct{})
			}
			t.turns[key] = mine
			t.mu.Unlock()
			return mine, nil
		}
		t.mu.Unlock()
		select {
		case <-prev:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// queueTurn takes the turn after the statements of key queued now,
// without waiting: the caller waits for prev (nil: none) before it runs,
// and ends its turn with endTurn.
func (t *Table) queueTurn(key string) (prev, mine chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, mine = t.turns[key], make(chan struct{})
	if t.turns == nil {
		t.turns = make(map[string]chan struct{})
	}
	t.turns[key] = mine
	return prev, mine
}

// endTurn ends the turn mine of key (nil: none).
func (t *Table) endTurn(key string, mine chan struct{}) {
	if mine == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	close(mine)
	if t.turns[key] == mine {
		delete(t.turns, key)
	}
}

// outcomeUnknown reports whether a take that failed with err may still
// have taken the row: the statement was cut off (its own timeout, a lost
// connection) rather than refused by the server, which rolls it back.
func outcomeUnknown(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || dberr.IsConnLoss(err)
}

// giveBackLater runs giveBack(c, 0) on a worker, for a take of a Fresh
// owner cut off on its caller's goroutine: it may have taken the row as
// its context ended. Close waits for it.
func (t *Table) giveBackLater(c Claim) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.giveBack(c, 0) // Close may be past its wait for bg: give back here
		return
	}
	t.bg.Add(1)
	t.mu.Unlock()
	t.work.run(func() {
		defer t.bg.Done()
		t.giveBack(c, 0)
	})
}

// giveBack returns the hold a take of c won (token), or, with token 0, the
// hold of c.Owner whatever its token. On MariaDB it queues for the row lock
// behind a statement of the take still waiting there, and so runs after it.
func (t *Table) giveBack(c Claim, token int64) {
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	var err error
	if token > 0 {
		err = t.Release(ctx, c.Key, c.Owner, token, 0)
	} else {
		_, err = t.ReleaseOwner(ctx, c.Key, c.Owner)
	}
	if err == nil && t.cfg.Freed != nil {
		t.cfg.Freed(c.Key)
	}
}

// Leave takes g's entry out of key's queue, in fair order (elsewhere it
// does nothing), and voids a grant of the row to it under a token above
// above, which nobody took: a release that granted the key to a waiter no
// longer waiting would keep everyone else out for the entry's lease. above
// is at least the token of a hold of g's owner on key that the caller
// still uses (an earlier grant to the same entry), which is left alone. It
// reports whether the entry was queued or granted.
func (t *Table) Leave(ctx context.Context, key string, g *Grant, above int64) (bool, error) {
	q, ok := t.st.(queuer)
	if !ok || !t.cfg.Fair || g == nil {
		return false, nil
	}
	n, err := q.leave(ctx, t.h, key, g.Entry)
	if err != nil {
		return false, err
	}
	v, err := q.void(ctx, t.h, key, g.owner, g.Entry, 0, max(above, 0))
	return n+v > 0, err
}

// LeaveQueue runs Leave in the background: the waiter of g gave up. It
// runs after the fair statements of key in flight (waitTurn), a take of
// the waiter's own included. Afterwards Config.Freed is called with key:
// a waiter of this process that came meanwhile, and may have found the
// entry queued already (one of the same owner), looks again. Close waits
// for it.
func (t *Table) LeaveQueue(key string, g *Grant, above int64) {
	if _, ok := t.st.(queuer); !ok || !t.cfg.Fair || g == nil {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.bg.Add(1)
	t.mu.Unlock()
	prev, mine := t.queueTurn(key)
	t.work.run(func() {
		defer t.bg.Done()
		defer t.endTurn(key, mine)
		if prev != nil {
			<-prev // each bounded by lease.ReleaseTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
		defer cancel()
		if left, err := t.Leave(ctx, key, g, above); left && err == nil && t.cfg.Freed != nil {
			t.cfg.Freed(key)
		}
	})
}

// queuesCalls reports whether a take of c may queue the Table's own entry:
// the default order where the store queues, for a claimant that listens
// (fair order queues each waiter's entry instead: Leave).
func (t *Table) queuesCalls(c Claim) bool { return c.Listening && t.callsQueue() }

// callsQueue reports whether the Table's rows queue the Lockers they call.
func (t *Table) callsQueue() bool {
	_, ok := t.st.(queuer)
	return ok && t.cfg.Notify && !t.cfg.Fair
}

// callEntry is the Table's own entry in a queue: a Locker that a release
// calls, the Table's id with no claim window, owner or host.
func (t *Table) callEntry() Entry { return Entry{Caller: t.id} }

// takingCall records a take of key, about to run, that may queue the
// Table's entry.
func (t *Table) takingCall(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = make(map[string]*called)
	}
	c := t.calls[key]
	if c == nil {
		c = &called{}
		t.calls[key] = c
	}
	c.inflight++
	c.takes++
	c.queued = true
}

// tookCall records that a take of key ended; won: it took the row, which
// takes the Table's entry out of the queue, so unless another take is in
// flight (it may queue it again) the row no longer queues it.
func (t *Table) tookCall(key string, won bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls[key]
	if c == nil {
		return // Close forgot it
	}
	c.inflight--
	if won && c.inflight == 0 {
		delete(t.calls, key)
	}
}

// LeaveCalls takes the Table's own entry out of key's queue in the
// default order (fair order: LeaveQueue): the last waiter of this process
// for key gave up, and a release that called the Table would keep the key
// from the waiters queued after it for a grace. It runs in the background
// after the statements of key in flight (waitTurn), a take of the
// waiter's own included, and only where a take may have queued the entry
// and waiting reports false then: a waiter that came meanwhile keeps the
// entry, and one that comes later takes its turn after this leave. A
// leave that took the entry out calls Config.Freed with key (a waiter
// whose take did not wait for the turn may have found the entry queued
// already). Close waits for it, and takes out the entries still queued.
func (t *Table) LeaveCalls(key string, waiting func() bool) {
	if !t.callsQueue() {
		return
	}
	t.mu.Lock()
	if t.closed || t.calls[key] == nil {
		t.mu.Unlock()
		return
	}
	t.bg.Add(1)
	t.mu.Unlock()
	prev, mine := t.queueTurn(key)
	t.work.run(func() {
		defer t.bg.Done()
		defer t.endTurn(key, mine)
		if prev != nil {
			<-prev // each bounded by lease.ReleaseTimeout
		}
		if waiting() {
			return
		}
		t.mu.Lock()
		c := t.calls[key]
		if c == nil || !c.queued {
			t.mu.Unlock()
			return
		}
		takes := c.takes
		t.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
		defer cancel()
		n, err := t.st.(queuer).leave(ctx, t.h, key, t.callEntry())
		if err != nil {
			return // Close tries again
		}
		t.mu.Lock()
		if c := t.calls[key]; c != nil && c.inflight == 0 && c.takes == takes {
			delete(t.calls, key)
		}
		t.mu.Unlock()
		if n > 0 && t.cfg.Freed != nil {
			t.cfg.Freed(key)
		}
	})
}

// Void gives back a grant of key to g's entry under token that its waiter
// will not use (the Locker closed as it arrived): the row goes to the
// entry queued next.
func (t *Table) Void(ctx context.Context, key string, g *Grant, token int64) error {
	q, ok := t.st.(queuer)
	if !ok || g == nil {
		return nil
	}
	_, err := q.void(ctx, t.h, key, g.owner, g.Entry, token, 0)
	return err
}

// Renew extends key's row to ttl from now if owner holds it under token,
// never shortening it (a manual extension outlives the automatic renewals
// that follow it; a renewal with an idle row still reports true). It
// reports false when the row is no longer that holder's (expired, taken,
// freed, deleted). Sent is when the statement that renewed was sent: the
// row lasts at least ttl from then, which may be later than the call (on
// SQLite a renewal looks again while another transaction writes).
func (t *Table) Renew(ctx context.Context, key, owner string, token int64, ttl time.Duration) (sent time.Time, ok bool, err error) {
	n, sent, err := t.st.renew(ctx, t.h, key, owner, token, ttl)
	return sent, n == 1, err
}

// Release gives one hold of owner's row back. When it is the last, the row
// is free from acquired_at + keep on: keep is 0 for a lock,
// jobguard's hold-at-least for a job. Transient errors are retried within
// ctx. It returns an error matching sqllock.ErrLockLost when the row is no
// longer that holder's.
func (t *Table) Release(ctx context.Context, key, owner string, token int64, keep time.Duration) error {
	var n int64
	err := backoff.Retry(ctx, backoff.Exp{Min: 5 * time.Millisecond, Max: 200 * time.Millisecond}, dberr.IsRetryable,
		func(ctx context.Context) (err error) {
			n, err = t.st.release(ctx, t.h, key, owner, token, keep)
			return err
		})
	if err == nil && n == 0 {
		return errRowLost
	}
	return err
}

// errRowLost: a release found the row no longer its holder's.
var errRowLost = fmt.Errorf("%w: the row is no longer this holder's", sqllock.ErrLockLost)

// ReleaseOwner gives one hold of key back if owner holds it, whatever its
// token: for a holder that no longer has its lease. It reports whether
// owner held key.
func (t *Table) ReleaseOwner(ctx context.Context, key, owner string) (bool, error) {
	n, err := t.st.releaseOwner(ctx, t.h, key, owner)
	return n > 0, err
}

// ForceRelease frees key, every hold, if it is still held under token: the
// operator's action on a holder that List showed. It reports whether it
// freed the key: false with a nil error when key is not held. When another
// holder has key now, it frees nothing and returns an error matching
// sqllock.ErrNotHeld that names that holder. An invalid key or a token
// below 1 is refused before any statement.
func (t *Table) ForceRelease(ctx context.Context, key string, token int64) (bool, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return false, err
	}
	if token <= 0 {
		return false, fmt.Errorf("%w: token %d names no holder (tokens start at 1)", sqllock.ErrInvalidOption, token)
	}
	n, err := t.st.forceRelease(ctx, t.h, key, token)
	if err != nil {
		return false, err
	}
	if n > 0 {
		return true, nil
	}
	return false, t.notHeld(ctx, key, token)
}

// Info describes one held row, as List reports it.
type Info struct {
	Key        string
	Owner      string // empty once released and only kept (jobguard's hold-at-least)
	Host       string // hostname/pid of the process that took it
	Holds      int    // reentrant hold count; 0 once released
	Token      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	HeldFor    time.Duration // since AcquiredAt, on the database clock
}

// List returns the rows held now, by key.
func (t *Table) List(ctx context.Context) ([]Info, error) {
	rows, err := t.h.stmts.Query(ctx, t.h.DB, t.st.sql().list)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Info
	for rows.Next() {
		var in Info
		var held int64
		var acq, exp any
		if err := rows.Scan(&in.Key, &in.Owner, &in.Host, &in.Holds, &in.Token, &acq, &exp, &held); err != nil {
			return nil, err
		}
		in.AcquiredAt, in.ExpiresAt = dialect.ToTime(acq), dialect.ToTime(exp)
		in.HeldFor = time.Duration(held) * time.Microsecond
		out = append(out, in)
	}
	return out, rows.Err()
}

// Reap deletes at most batch rows expired for longer than grace, and
// returns how many it deleted. Where the engine notifies (Config.Notify),
// it announces the keys whose holder never released. Its statement is not
// prepared: sweeps are rare, and a reaper has nothing to close.
func (t *Table) Reap(ctx context.Context, grace time.Duration, batch int) (int64, error) {
	return t.st.reap(ctx, t.h.DB, grace, batch)
}

// Live returns those of keys that are held now (a live row), in no order:
// one statement, an index lookup per key, that locks and writes nothing.
func (t *Table) Live(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := t.h.stmts.Query(ctx, t.h.DB, t.liveSQL(len(keys)), anys(keys)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// liveSQL is Live's statement for n keys, built once per n.
func (t *Table) liveSQL(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q, ok := t.live[n]; ok {
		return q
	}
	st := t.st.sql()
	var b strings.Builder
	b.WriteString(st.live)
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		b.WriteString(st.param(i))
	}
	b.WriteString(")")
	if t.live == nil {
		t.live = make(map[int]string)
	}
	t.live[n] = b.String()
	return t.live[n]
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
