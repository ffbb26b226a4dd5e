package tablecore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/telemetry"
	"github.com/sqllock/sqllock/internal/waiting"
)

var _ io.Closer = (*Locker)(nil)

// errClosed: a try found the Locker closed.
var errClosed = errors.New("tablelock: locker closed")

// Locker hands out leases backed by rows of a lock table: tablelock.Locker
// is this, and the primitives built on the lock table hold one too. It is
// safe for concurrent use. Close ends what it still holds (see tablelock's
// package doc).
type Locker struct {
	db      *sql.DB
	tbl     *locktable.Table
	cfg     Config
	host    string
	waiters *waiting.Queue
	ln      *locktable.Listener // nil unless the dialect announces releases and WithNotify is on
	gate    *locktable.Gate     // nil unless the dialect gates keys (MariaDB, SQLite) and WithNotify is on
	done    chan struct{}       // closed by Close
	tel     *telemetry.T

	mu     sync.Mutex
	holds  map[holdID]*hold
	closed bool
	tries  sync.WaitGroup // tries in flight
	// fairWaiters: fair Acquires with a Grant, each until it has left
	// the queue (Table.LeaveQueue).
	fairWaiters sync.WaitGroup
	renewers    sync.WaitGroup // renewal goroutines
	// turning: the keys one Acquire of this Locker waits for at their
	// turn gate (one per key; the others wait in the process).
	turning map[string]bool
}

// New returns a Locker over db for dialect d, configured by tablelock's
// options (O is tablelock.Option, whose underlying type this is). It checks
// them but does not touch the database. New never closes db.
func New[O ~func(*Config) error](db *sql.DB, d sqllock.Dialect, opts ...O) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("tablelock: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	cfg := Defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("tablelock: %w", err)
		}
	}
	if err := cfg.finish(); err != nil {
		return nil, fmt.Errorf("tablelock: %w", err)
	}
	if cfg.Fair && !roomToListen(db) {
		return nil, fmt.Errorf("tablelock: %w: WithFairness on a pool of one connection (SetMaxOpenConns(1)): a fair waiter listens for its grant on a session of its own, beside its statements", sqllock.ErrInvalidOption)
	}
	// A wake-up says "look again": several before a try count as one.
	waiters := waiting.NewQueue(waiting.Coalesce)
	tbl, err := locktable.Open(db, d, locktable.Config{
		Table:        cfg.Table,
		Notify:       true, // waiters elsewhere listen whether or not this Locker does
		AsyncCommit:  cfg.AsyncCommit,
		Fair:         cfg.Fair,
		Unprepared:   cfg.Pooler,
		SingleWriter: cfg.SingleWriter,
		TurnGates:    cfg.TurnGates,
		Freed:        func(key string) { waiters.Signal(key) },
	})
	if err != nil {
		return nil, fmt.Errorf("tablelock: %w", err)
	}
	l := &Locker{
		db: db, tbl: tbl, cfg: cfg, host: identity.Host(), waiters: waiters,
		done:  make(chan struct{}),
		holds: make(map[holdID]*hold),
		tel:   telemetry.New("tablelock", d.String(), cfg.Tel),
	}
	l.cfg.Logger = telemetry.Logger(cfg.Logger, "tablelock", d.String())
	if cfg.Notify {
		l.ln = tbl.Listener(waiters, cfg.Logger)
		l.gate = tbl.Gate(cfg.Logger)
	}
	return l, nil
}

// TTL is the lease length the Locker grants.
func (l *Locker) TTL() time.Duration { return l.cfg.TTL }

// Listener is the Locker's listening session, or nil when it has none (a
// dialect that announces nothing, WithNotify(false), a transaction
// pooler): election watches its term announcements on it rather than
// opening a second session, and hears nothing where it is nil.
func (l *Locker) Listener() *locktable.Listener { return l.ln }

// Table is the Locker's lock table: rwlock's writer asks it which reader
// rows are held, in one statement, rather than taking each.
func (l *Locker) Table() *locktable.Table { return l.tbl }

// Telemetry is the Locker's telemetry options: a primitive built on it
// records on instruments of its own, made with the same providers.
func (l *Locker) Telemetry() telemetry.Options { return l.cfg.Tel }

// Acquire is tablelock.Locker.Acquire: it blocks until key is held by the
// owner in ctx (or a fresh random owner) or ctx ends.
func (l *Locker) Acquire(ctx context.Context, key string) (*Lease, error) {
	return l.acquire(ctx, key, true)
}

// TryAcquire is tablelock.Locker.TryAcquire: it takes key if it is free,
// expired or already held by the owner in ctx.
func (l *Locker) TryAcquire(ctx context.Context, key string) (*Lease, error) {
	return l.acquire(ctx, key, false)
}

func (l *Locker) acquire(ctx context.Context, key string, wait bool) (_ *Lease, err error) {
	ctx, obs := l.tel.StartAcquire(ctx, key, wait)
	var won *Lease
	tries := 0
	defer func() {
		lease.EndAcquire(ctx, obs, won, tries, err)
	}()
	if err := sqllock.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("tablelock: acquire %q: %w", key, err)
	}
	owner, fresh, err := identity.Resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("tablelock: acquire %q: %w", key, err)
	}
	if l.isClosed() {
		return nil, closedErr(key, false)
	}
	if err := ctxend.Err(ctx); err != nil {
		return nil, notAcquired(key, err)
	}
	listening := false
	if wait && l.ln != nil && !roomToListen(l.db) {
		if l.cfg.Fair {
			return nil, fmt.Errorf("tablelock: acquire %q: %w: WithFairness on a pool of one connection: no room for the session that listens for grants", key, sqllock.ErrUnsupported)
		}
		// The listening session would pin the pool's one connection, and
		// the tries would wait for it: this waiter polls.
	} else if wait && l.ln != nil {
		// Subscribe before the first try so a release between a refused
		// try and the wait cannot be missed.
		if err := l.ln.Subscribe(ctx); err == nil {
			listening = true
			defer l.ln.Unsubscribe()
		} else if cerr := ctxend.Err(ctx); cerr != nil {
			return nil, notAcquired(key, cerr)
		} else if l.cfg.Fair && errors.Is(err, locktable.ErrCannotListen) {
			// A waiter that hears no grant would sleep through its turn:
			// no fair order.
			return nil, fmt.Errorf("tablelock: acquire %q: %w: WithFairness needs LISTEN, which the driver behind the *sql.DB cannot do (use the pgx stdlib driver)", key, sqllock.ErrUnsupported)
		}
	}
	// In fair order the waiter queues an entry of its own in the row, and
	// a release may grant it the key (locktable.Grant).
	var g *locktable.Grant
	if listening && l.cfg.Fair {
		l.mu.Lock()
		if !l.closed {
			// A grant holds the key for the claim window; the
			// grantee's take (its claim) extends it to the TTL.
			g = l.ln.Expect(key, owner, l.host, l.cfg.Claim)
		}
		if g != nil {
			l.fairWaiters.Add(1)
		}
		l.mu.Unlock()
		if g == nil {
			// Another waiter of this owner queued for the key here (or
			// the Locker is closing): this one polls.
			listening = false
		} else {
			defer func() {
				l.ln.Unexpect(g)
				// One that no longer waits leaves the queue, and gives
				// back a grant it did not take: else the key stays
				// with it for a lease.
				if won == nil {
					// A hold of this owner still in use here (an
					// earlier grant to the same entry) is older than
					// any grant to this waiter.
					l.tbl.LeaveQueue(key, g, max(g.Above(), l.heldToken(key, owner)))
				}
				l.fairWaiters.Done()
			}()
		}
	}
	last := locktable.Attempt{Remaining: -1}
	// At the key's turn gate (locktable.GateTake), where the table has
	// them: one waiter of this Locker per key, keeping the gate (tg)
	// while first in line.
	var tg *locktable.TurnGate
	turning := wait && l.tbl.TurnGates() && l.turn(key, true)
	poll, polled := backoff.Exp{Min: time.Millisecond, Max: l.turnWait(last)}, int64(0)
	if turning {
		defer func() {
			if tg != nil {
				tg.Let() // first in line, it gave up
			}
			l.turn(key, false)
		}()
	}
	err = waiting.Run(ctx, waiting.Spec{
		Queue:     l.waiters,
		Key:       key,
		Wait:      wait,
		Reentry:   wait && l.holding(key, owner),
		Listening: listening,
		Backoff:   backoff.Exp{Min: time.Millisecond, Max: l.cfg.MaxBackoff},
		Closed:    l.done,
		Block:     l.blockFor(key, &last),
		Line:      l.lineFor(key),
		Wake:      g.Wake(),
		Bound:     l.cfg.Bound,
		Try: func(ctx context.Context, t waiting.Turn) (waiting.Result, error) {
			var heard, above int64
			if g != nil {
				heard, above = g.Take(), g.Above()
			}
			// A queued first try, or one woken by a release, expects the
			// key free.
			c := locktable.Claim{Key: key, Owner: owner, Host: l.host, TTL: l.cfg.TTL,
				ExpectFree: t.Queued && (t.Tries == 0 || t.Woken), Fresh: fresh, Listening: listening}
			if g != nil {
				c.Entry, c.Above = g.Entry, above
				c.Accept = c.Above >= 0
				if heard > 0 {
					// A grant heard: this take claims it, within the
					// claim window (WithClaimWindow), as its own.
					c.Accept, c.Above = true, heard-1
				}
			}
			if heard > above && above >= 0 {
				// A grant made after the take that queued the entry.
				if lease, ok := l.holdGrant(ctx, c, g, heard); ok {
					won, last, tries = lease, locktable.Attempt{Won: true, Token: heard, Holds: 1}, t.Tries+1
					if lease == nil {
						return waiting.Result{}, errClosed
					}
					return waiting.Result{Won: true}, nil
				}
			}
			sent := time.Now()
			var (
				lease *Lease
				a     locktable.Attempt
				err   error
				gated bool
			)
			if turning && (t.Tries > 0 || tg != nil || l.tbl.Hot(key)) && !l.holdingKey(key) {
				lease, a, err, gated = l.tryTurn(ctx, c, &tg, l.turnWait(last))
			}
			if !gated {
				lease, a, err = l.try(ctx, c)
			}
			won, last, tries = lease, a, t.Tries+1
			if g != nil && err == nil && lease == nil && a.Queued {
				g.Queued(a.Token, sent)
			}
			r := waiting.Result{Won: lease != nil, Remaining: a.Remaining}
			if lease == nil {
				r.Holder = a.Token
			}
			switch {
			case !gated || lease != nil || err != nil:
			case tg == nil:
				// The wait ended by its bound (a gate kept long): back
				// to the gate at once, where a release lets it through.
				r.Remaining = 0
			default:
				// First in line, behind a holder that keeps no gate: the
				// waiters behind wait in the server, so this one looks
				// again soon, then less often.
				if a.Token != polled {
					poll.Reset()
				}
				polled = a.Token
				if d := poll.Next(); r.Remaining < 0 || d < r.Remaining {
					r.Remaining = d
				}
			}
			return r, err
		},
	})
	if err != nil && listening && g == nil {
		// The last waiter of this Locker for key takes the Locker's entry
		// out of the row: a release that called it would keep the key
		// from the waiters queued after it for a grace. Close takes out
		// those still queued.
		l.tbl.LeaveCalls(key, func() bool { return l.waiters.Waiting(key) })
	}
	switch {
	case err == nil:
		return won, nil
	case errors.Is(err, errClosed):
		return nil, closedErr(key, true)
	case errors.Is(err, waiting.ErrRefused):
		return nil, refused(key, last)
	}
	if ended := ctxend.Ended(ctx, err); ended != nil {
		return nil, notAcquired(key, ended)
	}
	return nil, fmt.Errorf("tablelock: acquire %q: %w", key, err)
}

// try makes one take of c; a nil lease without error means refused. A take
// won while Close runs is given back: the Locker holds nothing after Close.
func (l *Locker) try(ctx context.Context, c locktable.Claim) (*Lease, locktable.Attempt, error) {
	if !l.enter() {
		return nil, locktable.Attempt{Remaining: -1}, errClosed
	}
	defer l.tries.Done()
	start := time.Now()
	a, err := l.tbl.TakeDetached(ctx, c)
	if err != nil || !a.Won {
		return nil, a, err
	}
	if s := l.newLease(ctx, c.Key, c.Owner, a, start); s != nil {
		return s, a, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease.ReleaseTimeout)
	defer cancel()
	_ = l.tbl.Release(ctx, c.Key, c.Owner, a.Token, 0)
	l.waiters.Signal(c.Key)
	return nil, a, errClosed
}

// tryTurn makes one take of c behind c.Key's turn gate (locktable.GateTake),
// waiting up to d for it unless *tg keeps it already; *tg is the gate
// this waiter keeps afterwards, first in line. ok is false where no
// session could be had for the gate, and nothing was done: the caller
// takes without it. A lease won keeps the gate until its release.
func (l *Locker) tryTurn(ctx context.Context, c locktable.Claim, tg **locktable.TurnGate, d time.Duration) (_ *Lease, _ locktable.Attempt, _ error, ok bool) {
	if !l.enter() {
		return nil, locktable.Attempt{Remaining: -1}, errClosed, true
	}
	defer l.tries.Done()
	// A wait in the server ends when the Locker closes.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-wctx.Done():
		}
	}()
	start := time.Now()
	a, g, err := l.tbl.GateTake(wctx, c, d, *tg)
	if errors.Is(err, locktable.ErrNoTurnGate) {
		return nil, a, nil, false
	}
	*tg = g
	if err != nil && ctx.Err() == nil && l.isClosed() {
		return nil, a, errClosed, true
	}
	if err != nil || !a.Won {
		return nil, a, err, true
	}
	*tg = nil
	if s := l.newLease(ctx, c.Key, c.Owner, a, start); s != nil {
		if !s.h.keepTurn(g) {
			g.Let() // a hold of this owner shares the row, and releases it
		}
		return s, a, nil, true
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), lease.ReleaseTimeout)
	defer rcancel()
	_ = g.Release(rctx, c.Owner, a.Token, 0)
	l.waiters.Signal(c.Key)
	return nil, a, errClosed, true
}

// turnWait is how long a take waits at the turn gate: the wait bound,
// or less where the holder's lease ends sooner.
func (l *Locker) turnWait(last locktable.Attempt) time.Duration {
	d := l.cfg.Bound
	if d <= 0 {
		d = time.Second
	}
	if last.Remaining > 0 && last.Remaining < d {
		d = last.Remaining + time.Millisecond
	}
	return d
}

// turn marks key as waited for at its turn gate by one Acquire of this
// Locker (on), reporting false when another does already, or unmarks it.
func (l *Locker) turn(key string, on bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !on {
		delete(l.turning, key)
		return true
	}
	if l.turning[key] {
		return false
	}
	if l.turning == nil {
		l.turning = make(map[string]bool)
	}
	l.turning[key] = true
	return true
}

// holdGrant holds the key as granted to g's entry under token, without
// a statement, where the grant's window surely has room left: it began
// after the last take that found the entry queued was sent (a release
// pops the entry it grants, and that take saw a holder under a smaller
// token), so the row is the waiter's until that send time plus the
// window, and the lease counts itself lost before then, with a margin of
// a tenth of the window, unless its renewal (at half the time left)
// extends the row to the TTL. The grant's commit waited for its WAL
// flush, as a take's does; with AsyncCommit it did not, and the waiter
// claims the row as a take. ok is false where the waiter is to claim
// it; a nil lease with ok means the Locker closed, and the grant was
// given back.
func (l *Locker) holdGrant(ctx context.Context, c locktable.Claim, g *locktable.Grant, token int64) (_ *Lease, ok bool) {
	q := g.QueuedAt()
	if l.cfg.AsyncCommit || q.IsZero() {
		return nil, false
	}
	deadline := q.Add(l.cfg.Claim - l.cfg.Claim/10)
	if time.Until(deadline) < l.cfg.Claim/4 {
		return nil, false
	}
	if !l.enter() {
		return nil, false // the take that follows finds the Locker closed
	}
	defer l.tries.Done()
	a := locktable.Attempt{Won: true, Token: token, Holds: 1}
	// Renewed at half the time left: room to retry before the deadline.
	if s := l.newLeaseUntil(ctx, c.Key, c.Owner, a, deadline, time.Until(deadline)/2); s != nil {
		return s, true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease.ReleaseTimeout)
	defer cancel()
	_ = l.tbl.Release(ctx, c.Key, c.Owner, token, 0)
	l.waiters.Signal(c.Key)
	return nil, true
}

// enter counts a try in flight, which Close waits for (tries), unless
// the Locker is closed; the try calls l.tries.Done when it ends.
func (l *Locker) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.tries.Add(1)
	return true
}

// roomToListen reports whether db's pool leaves room for a listening
// session beside the statements: not a pool of one connection.
func roomToListen(db *sql.DB) bool { return db.Stats().MaxOpenConnections != 1 }

// blockFor returns the waiting.Spec.Block of an Acquire of key: a wait
// on the key's gate, where the Locker has gates; last is the Acquire's
// last refused try. A key this Locker holds is left to the wake-ups of
// this process, and a holder younger than gateAfter (and the round trip
// that takes its gate) to polling: it may keep no gate yet. SQLite's
// gates say so themselves (Gate.Knows), so any holder is waited on.
func (l *Locker) blockFor(key string, last *locktable.Attempt) func(context.Context, time.Duration) (bool, bool) {
	if l.gate == nil {
		return nil
	}
	return func(ctx context.Context, d time.Duration) (bool, bool) {
		if (!l.gate.Knows() && last.HeldFor < gateAfter+gateAfter/2) || l.holdingKey(key) {
			return false, false
		}
		got, err := l.gate.Wait(ctx, key, d)
		return got, err == nil
	}
}

// lineFor returns the waiting.Spec.Line of an Acquire of key: a place in
// the key's line (locktable.Gate.Line), where the Locker has gates. A key
// this Locker holds is left to the wake-ups of this process.
func (l *Locker) lineFor(key string) func(context.Context, time.Duration) (func(), bool) {
	if l.gate == nil {
		return nil
	}
	return func(ctx context.Context, d time.Duration) (func(), bool) {
		if l.holdingKey(key) {
			return nil, false
		}
		leave, err := l.gate.Line(ctx, key, d)
		return leave, err == nil
	}
}

// holdingKey reports whether any owner holds key through this Locker.
func (l *Locker) holdingKey(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.holds {
		if id.key == key {
			return true
		}
	}
	return false
}

// isClosed reports whether Close has been called.
func (l *Locker) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// heldToken is the token under which owner holds key through this
// Locker, or 0.
func (l *Locker) heldToken(key, owner string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.holds[holdID{key, owner}]; h != nil {
		return h.token
	}
	return 0
}

// holding reports whether owner holds key through this Locker.
func (l *Locker) holding(key, owner string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.holds[holdID{key, owner}]
	return ok
}

// notAcquired is the error of an acquisition that ended for cause (the
// context's error), joined so that both match.
func notAcquired(key string, cause error) error {
	return errors.Join(fmt.Errorf("tablelock: acquire %q: %w", key, sqllock.ErrNotAcquired), cause)
}

// refused is the error of a TryAcquire that found key held; it names the
// holder when the try saw it.
func refused(key string, a locktable.Attempt) error {
	switch {
	case a.Host == "":
		return fmt.Errorf("tablelock: acquire %q: %w", key, sqllock.ErrNotAcquired)
	case a.Remaining >= 0:
		return fmt.Errorf("tablelock: acquire %q: %w: held by %s for %v more", key, sqllock.ErrNotAcquired, a.Host, a.Remaining.Round(time.Millisecond))
	}
	return fmt.Errorf("tablelock: acquire %q: %w: held by %s", key, sqllock.ErrNotAcquired, a.Host)
}

// closedErr is the error of an acquisition refused by a closed Locker;
// blocked: it was under way when Close came, and did not get the key.
func closedErr(key string, blocked bool) error {
	if blocked {
		return fmt.Errorf("tablelock: acquire %q: %w: %w", key, sqllock.ErrNotAcquired, sqllock.ErrClosed)
	}
	return fmt.Errorf("tablelock: acquire %q: %w", key, sqllock.ErrClosed)
}

// Close is tablelock.Locker.Close: it refuses later acquisitions, wakes the
// Acquires blocked in it, ends every lease it holds as lost and frees their
// keys, stops its listener and renewals and closes its prepared statements.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done) // wakes the blocked Acquires, which see closed
	holds := make([]*hold, 0, len(l.holds))
	for _, h := range l.holds {
		holds = append(holds, h)
	}
	l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
	}
	// A try in flight either added its hold before closed was set (it is
	// in holds) or gives back what it took. A fair waiter leaves its
	// queue, and gives back a grant it did not take, before the table
	// closes.
	l.tries.Wait()
	l.fairWaiters.Wait()
	// Lost first, freed after: a holder learns of the end before anyone
	// else can take its key.
	for _, h := range holds {
		h.lose("the Locker was closed", false)
	}
	l.renewers.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	var errs []error
	for _, h := range holds {
		// By token: every hold of this holder, and nothing of a holder
		// that took the key since.
		if _, err := l.tbl.ForceRelease(ctx, h.id.key, h.token); err != nil && !errors.Is(err, sqllock.ErrNotHeld) {
			errs = append(errs, fmt.Errorf("free %q: %w", h.id.key, err))
		}
		l.waiters.Signal(h.id.key)
		if g := h.takeTurn(true); g != nil {
			g.Let() // after the row: the next waiter's take finds it free
		}
	}
	if l.gate != nil {
		l.gate.Close() // after the rows: its gates let the waiters through
	}
	errs = append(errs, l.tbl.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tablelock: close: %w (those keys expire by themselves)", err)
	}
	return nil
}

// ReleaseKey is tablelock.Locker.ReleaseKey: it releases one hold of key
// by the owner in ctx, for a process that no longer has the lease.
func (l *Locker) ReleaseKey(ctx context.Context, key string) error {
	if err := sqllock.ValidateKey(key); err != nil {
		return fmt.Errorf("tablelock: release %q: %w", key, err)
	}
	owner, fresh, err := identity.Resolve(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("tablelock: release %q: %w", key, err)
	case fresh:
		return fmt.Errorf("tablelock: release %q: %w: no owner in context", key, sqllock.ErrNotHeld)
	}
	held, err := l.tbl.ReleaseOwner(ctx, key, owner)
	l.waiters.Signal(key)
	if err != nil {
		return fmt.Errorf("tablelock: release %q: %w", key, err)
	}
	if !held {
		return fmt.Errorf("tablelock: release %q: %w: owner %q", key, sqllock.ErrNotHeld, owner)
	}
	return nil
}

// ForceRelease is tablelock.Locker.ForceRelease: it frees key, if it is
// still held under token, with the audit record a.
func (l *Locker) ForceRelease(ctx context.Context, key string, token int64, a locktable.Audit) (bool, error) {
	freed, err := l.tbl.ForceReleaseAudited(ctx, key, token, a)
	if err != nil {
		return false, fmt.Errorf("tablelock: force release %q: %w", key, err)
	}
	if freed {
		l.waiters.Signal(key)
		l.tel.ForceReleased(ctx, key)
	}
	return freed, nil
}

// List is tablelock.Locker.List: the locks held now, by key.
func (l *Locker) List(ctx context.Context) ([]locktable.Info, error) {
	rows, err := l.tbl.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("tablelock: list: %w", err)
	}
	return rows, nil
}
