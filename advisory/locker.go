package advisory

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
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/telemetry"
	"github.com/sqllock/sqllock/internal/waiting"
)

var (
	_ sqllock.Locker = (*Locker)(nil)
	_ SharedLocker   = (*Locker)(nil)
	_ io.Closer      = (*Locker)(nil)
)

// SharedLocker is the read side of a read/write lock: any number of shared
// leases on a key at once, none while an exclusive lease (Acquire) holds
// it. Locker implements it on PostgreSQL; on MySQL both methods return an
// error matching sqllock.ErrUnsupported.
type SharedLocker interface {
	// AcquireShared blocks until key is held in shared mode or ctx ends.
	AcquireShared(ctx context.Context, key string) (sqllock.Lease, error)
	// TryAcquireShared returns at once: a shared lease, or an error matching
	// sqllock.ErrNotAcquired while an exclusive holder has key.
	TryAcquireShared(ctx context.Context, key string) (sqllock.Lease, error)
}

// minBackoff is the first pause of a blocked Acquire.
const minBackoff = time.Millisecond

// errPooledSession says why a Locker made WithTransactionPooler refuses
// session locks.
const errPooledSession = "a session lock taken through a transaction pooler stays on a server session that the proxy hands to the next client, " +
	"who would be granted the same key (WithTransactionPooler); use AcquireTx or DoTx, whose lock ends with the transaction"

// errClosed: a try found the Locker closed.
var errClosed = errors.New("advisory: locker closed")

type mode uint8

const (
	exclusive mode = iota
	shared
)

type state uint8

const (
	stTrying    state = iota // a caller of this Locker is trying for the key, or backing off
	stHeld                   // the server holds it for us
	stReleasing              // the unlock statement is queued or running
)

// entry is this Locker's stake in one key. While an entry exists no other
// caller of the Locker goes to the server for the key: the server cannot
// tell two owners on one session apart (advisory locks stack per session,
// GET_LOCK is reentrant), so the Locker tells them apart itself.
type entry struct {
	key   string
	id    lockID
	mode  mode
	owner string // the exclusive holder, or the owner trying
	sess  *session

	// Guarded by Locker.mu.
	ws      *session // the wait session serving the entry, if any
	state   state
	token   int64
	leases  map[*Lease]struct{}
	changed chan struct{} // closed at every state change and at removal
	lost    string        // why the lock was lost; empty while it is not
}

// signal wakes the Locker's callers waiting on e. Locker.mu held.
func (e *entry) signal() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Locker hands out leases backed by PostgreSQL advisory locks or MySQL
// named locks, multiplexed onto a few pinned sessions. It is safe for
// concurrent use. Close ends what it still holds (see the package doc).
type Locker struct {
	db       *sql.DB
	d        sqllock.Dialect
	st       store
	prepare  bool // st.prepare()
	cfg      config
	srv      *server.Check // nil where the dialect probes no server
	sessions []*session
	waiters  []*session      // wait sessions (wait.go), pinned while in use
	wg       sync.WaitGroup  // session checkers
	done     <-chan struct{} // closing's Done: closed by Close
	closing  context.Context // ends at Close, for what must act on it (wait.go)
	close    context.CancelFunc
	tel      *telemetry.T

	mu      sync.Mutex
	keys    map[string]*entry
	refused map[string]time.Time // keys refused to a blocked Acquire lately (wait.go)
	closed  bool
}

// New returns a Locker over db for dialect d: PostgreSQL or MySQL/MariaDB.
// SQLite has no advisory locks and gets an error matching
// sqllock.ErrUnsupported. New checks its options but does not touch the
// database; the fencing sequence comes from migrations.Up. New never closes
// db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("advisory: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	st, ok := stores[d]
	switch {
	case !ok && d.Valid():
		return nil, fmt.Errorf("advisory: %w: %v has no advisory locks; use tablelock", sqllock.ErrUnsupported, d)
	case !ok:
		return nil, fmt.Errorf("advisory: %w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("advisory: %w", err)
		}
	}
	if cfg.pooler {
		if err := st.supports(featTx); err != nil {
			return nil, fmt.Errorf("advisory: WithTransactionPooler: %w", err)
		}
	}
	if cfg.noToken {
		st = noTokenStore{st}
	}
	l := &Locker{db: db, d: d, srv: server.New(db, d, cfg.singleWriter), st: st, prepare: st.prepare(), cfg: cfg, keys: make(map[string]*entry), refused: make(map[string]time.Time),
		tel: telemetry.New("advisory", d.String(), cfg.tel)}
	l.closing, l.close = context.WithCancel(context.Background())
	l.done = l.closing.Done()
	l.cfg.logger = telemetry.Logger(cfg.logger, "advisory", d.String())
	l.sessions = make([]*session, cfg.sessions)
	for i := range l.sessions {
		l.sessions[i] = newSession(l)
	}
	l.waiters = make([]*session, cfg.waits)
	for i := range l.waiters {
		l.waiters[i] = newSession(l)
	}
	return l, nil
}

// Namespace returns the prefix of the Locker's lock names.
func (l *Locker) Namespace() string { return l.cfg.namespace }

// Acquire blocks until key is held by the owner in ctx (or a fresh random
// owner) or ctx ends; then the error matches both sqllock.ErrNotAcquired and
// ctx.Err(). The wait blocks in the server on a connection of its own
// where the Locker has one free (WithWaitSessions), and polls otherwise.
func (l *Locker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, exclusive, true)
}

// TryAcquire takes key if it is free or already held by the owner in ctx,
// and otherwise returns an error matching sqllock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, exclusive, false)
}

// AcquireShared blocks until key is held in shared mode (PostgreSQL only).
// Shared holders of one Locker share one server-side lock and one token; an
// owner holding key shared cannot acquire it exclusively (that would wait
// for itself) and is refused at once.
func (l *Locker) AcquireShared(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, shared, true)
}

// TryAcquireShared takes key in shared mode if no exclusive holder has it
// (PostgreSQL only).
func (l *Locker) TryAcquireShared(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, shared, false)
}

func opName(m mode) string {
	if m == shared {
		return "acquire shared"
	}
	return "acquire"
}

// notAcquired is the error of an acquisition that ended for cause (the
// context's error), joined so that both match.
func notAcquired(op, key string, cause error) error {
	return errors.Join(fmt.Errorf("advisory: %s %q: %w", op, key, sqllock.ErrNotAcquired), cause)
}

// closedErr is the error of an acquisition refused by a closed Locker;
// blocked: it was waiting when Close came, and did not get the key.
func closedErr(op, key string, blocked bool) error {
	if blocked {
		return fmt.Errorf("advisory: %s %q: %w: %w", op, key, sqllock.ErrNotAcquired, sqllock.ErrClosed)
	}
	return fmt.Errorf("advisory: %s %q: %w", op, key, sqllock.ErrClosed)
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

func (l *Locker) acquire(ctx context.Context, key string, m mode, wait bool) (sqllock.Lease, error) {
	ctx, obs := l.tel.StartAcquire(ctx, key, wait)
	s, err := l.take(ctx, key, m, wait)
	lease.EndAcquire(ctx, obs, s, 0, err)
	return s, err
}

// take is acquire's work.
func (l *Locker) take(ctx context.Context, key string, m mode, wait bool) (sqllock.Lease, error) {
	op := opName(m)
	if err := sqllock.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	}
	if l.cfg.pooler {
		return nil, fmt.Errorf("advisory: %s %q: %w: %s", op, key, sqllock.ErrUnsupported, errPooledSession)
	}
	if m == shared {
		if err := l.st.supports(featShared); err != nil {
			return nil, fmt.Errorf("advisory: %s %q: %w", op, key, err)
		}
	}
	if err := l.srv.Check(ctx); err != nil {
		return nil, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	}
	owner, _, err := identity.Resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	}
	if err := ctxend.Err(ctx); err != nil {
		return nil, notAcquired(op, key, err)
	}
	id := l.lockID(key)
	for waited := false; ; waited = true {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, closedErr(op, key, waited)
		}
		e := l.keys[key]
		if e == nil {
			e = &entry{key: key, id: id, mode: m, owner: owner, sess: l.sessions[id.slot],
				state: stTrying, leases: make(map[*Lease]struct{}), changed: make(chan struct{})}
			l.keys[key] = e
			l.mu.Unlock()
			return l.poll(ctx, e, wait)
		}
		if e.state == stHeld {
			switch {
			case e.mode == exclusive && e.owner == owner, e.mode == shared && m == shared:
				lease := l.addLease(ctx, e, owner)
				l.mu.Unlock()
				return lease, nil
			case e.mode == shared && e.hasOwner(owner):
				l.mu.Unlock()
				return nil, fmt.Errorf("advisory: %s %q: %w: the owner holds it shared, and upgrading would wait for itself", op, key, sqllock.ErrNotAcquired)
			}
		}
		if !wait {
			l.mu.Unlock()
			return nil, fmt.Errorf("advisory: %s %q: %w: held or being taken by another owner of this Locker", op, key, sqllock.ErrNotAcquired)
		}
		ch := e.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-l.done:
		case <-ctx.Done():
			return nil, notAcquired(op, key, ctx.Err())
		}
	}
}

// lockID is key's lock, and the session it lives on.
func (l *Locker) lockID(key string) lockID {
	id := l.st.lockID(l.cfg.namespace, key)
	id.slot = int(id.hash % uint64(len(l.sessions)))
	return id
}

func (e *entry) hasOwner(owner string) bool {
	for s := range e.leases {
		if s.owner == owner {
			return true
		}
	}
	return false
}

// addLease adds a lease on a held entry. Locker.mu held.
func (l *Locker) addLease(ctx context.Context, e *entry, owner string) *Lease {
	s := &Lease{l: l, e: e, owner: owner}
	s.base.Init("advisory", e.key, e.token)
	s.base.Observe(ctx, l.tel)
	e.leases[s] = struct{}{}
	return s
}

// remove drops e from the Locker and wakes whoever waits on it. Locker.mu held.
func (l *Locker) remove(e *entry) {
	if l.keys[e.key] == e {
		delete(l.keys, e.key)
	}
	l.freeWaiter(e)
	close(e.changed)
}

// poll is run by the one caller that created e: it tries the server until it
// wins, is refused (without wait), fails or its context ends, through the
// module's wait loop and the process-wide queue of the key. Other callers
// of the Locker wait on e meanwhile, so a key costs one statement per
// backoff step however many goroutines wait for it.
func (l *Locker) poll(ctx context.Context, e *entry, wait bool) (sqllock.Lease, error) {
	var won *Lease
	var err error
	polls := true
	if wait && len(l.waiters) > 0 {
		won, polls, err = l.waitInServer(ctx, e)
	}
	if polls {
		err = l.pollLoop(ctx, e, wait, &won)
	}
	if err == nil {
		return won, nil
	}
	l.mu.Lock()
	l.remove(e)
	l.mu.Unlock()
	op := opName(e.mode)
	switch {
	case errors.Is(err, errClosed):
		return nil, closedErr(op, e.key, true)
	case errors.Is(err, waiting.ErrRefused):
		return nil, fmt.Errorf("advisory: %s %q: %w", op, e.key, sqllock.ErrNotAcquired)
	}
	if ended := ctxend.Ended(ctx, err); ended != nil {
		return nil, notAcquired(op, e.key, ended)
	}
	return nil, fmt.Errorf("advisory: %s %q: %w", op, e.key, err)
}

// pollLoop tries e's lock with backoff until it wins (into won).
func (l *Locker) pollLoop(ctx context.Context, e *entry, wait bool, won **Lease) error {
	return waiting.Run(ctx, waiting.Spec{
		Queue:   wakeups,
		Key:     e.id.wake,
		Wait:    wait,
		Backoff: backoff.Exp{Min: minBackoff, Max: l.cfg.maxBackoff},
		Closed:  l.done,
		Try: func(ctx context.Context, t waiting.Turn) (waiting.Result, error) {
			lease, err := l.tryOnce(ctx, e)
			if err != nil && t.Queued && dberr.IsRetryable(err) {
				l.cfg.logger.Info("advisory: acquire failed, retrying", telemetry.AttrKey, e.key, telemetry.LogError, err.Error())
			}
			*won = lease
			return waiting.Result{Won: lease != nil, Remaining: -1}, err
		},
	})
}

// tryOnce makes one attempt at e's lock on its session; a nil lease
// without error means another session holds it.
func (l *Locker) tryOnce(ctx context.Context, e *entry) (*Lease, error) {
	caller := ctx // the session runs under its own context; the span is the caller's
	var lease *Lease
	closed := false
	err := e.sess.run(ctx, true, func(ctx context.Context) error {
		// Close marks the Locker closed before it takes the session locks:
		// checked here, no lock can be taken after Close has cleaned up.
		if closed = l.isClosed(); closed {
			return nil
		}
		tok, ok, err := l.st.try(ctx, e.sess, e.id, e.mode)
		if err != nil || !ok {
			return err
		}
		// Still under the session lock: a concurrent failure of the
		// session sees the entry held and ends it.
		e.sess.held++
		l.mu.Lock()
		e.state, e.token = stHeld, tok
		lease = l.addLease(caller, e, e.owner)
		e.signal()
		l.mu.Unlock()
		return nil
	})
	if err == nil && closed {
		err = errClosed
	}
	return lease, err
}

// loseSession ends every lock held on s with cause. sem of s held.
func (l *Locker) loseSession(s *session, cause string) {
	l.mu.Lock()
	var ended []*entry
	var leases []*Lease
	for _, e := range l.keys {
		if e.sess != s || e.state == stTrying {
			continue
		}
		e.lost = cause
		ended = append(ended, e)
		for x := range e.leases {
			leases = append(leases, x)
		}
	}
	for _, e := range ended {
		l.remove(e)
	}
	l.mu.Unlock()
	for _, x := range leases {
		x.base.Lose(x.base.Lost(cause))
	}
	for _, e := range ended {
		wakeups.Signal(e.id.wake)
	}
}

// Close ends the Locker, as the package doc says: it refuses later
// acquisitions with sqllock.ErrClosed, wakes the Acquires blocked in it,
// frees every lock it holds (one unlock-all statement per pinned session)
// and ends those leases as lost, stops its session checkers and closes its
// prepared statements. A session whose clean-up fails is closed, which
// frees its locks in the server too. Close never closes the *sql.DB; later
// calls return nil.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.close() // wakes the blocked Acquires, which see closed
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	var errs []error
	for _, s := range append(l.sessions[:len(l.sessions):len(l.sessions)], l.waiters...) {
		err := s.run(ctx, false, func(ctx context.Context) error {
			if err := l.st.unlockAll(ctx, s); err != nil {
				return err
			}
			s.held = 0
			l.loseSession(s, "the Locker was closed")
			s.unpin()
			return nil
		})
		if err != nil && !errors.Is(err, errNoSession) {
			errs = append(errs, err)
		}
	}
	l.wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("advisory: close: %w", err)
	}
	return nil
}

// wakeups queues the blocked Acquires of this process per server lock, in
// arrival order, across all Lockers. A release here wakes one waiter, the
// first not already woken: waking all would send them to the server
// together for one winner. A waiter woken that gives up passes the wake on.
// Waiters also poll on a timer, for releases in other processes.
var wakeups = waiting.NewQueue(waiting.PerRelease)
