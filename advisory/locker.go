package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
	"github.com/sqllock/sqllock/internal/waitq"
)

var (
	_ sqllock.Locker = (*Locker)(nil)
	_ SharedLocker   = (*Locker)(nil)
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

// releaseTimeout bounds Close's clean-up statements.
const releaseTimeout = 5 * time.Second

// minBackoff is the first pause of a blocked Acquire.
const minBackoff = time.Millisecond

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
	state   state
	token   int64
	leases  map[*Lease]struct{}
	changed chan struct{} // closed at every state change and at removal
	lostErr error
}

// signal wakes the Locker's callers waiting on e. Locker.mu held.
func (e *entry) signal() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Locker hands out leases backed by PostgreSQL advisory locks or MySQL
// named locks, multiplexed onto a few pinned sessions. It is safe for
// concurrent use. Close releases everything it still holds.
type Locker struct {
	db       *sql.DB
	dialect  sqllock.Dialect
	cfg      config
	q        queries
	sessions []*session
	wg       sync.WaitGroup // session checkers

	mu     sync.Mutex
	keys   map[string]*entry
	closed bool
}

// New returns a Locker over db for dialect d (sqllock.Postgres or
// sqllock.MySQL; sqllock.SQLite has no advisory locks and gets an error
// matching sqllock.ErrUnsupported). It checks its options but does not touch
// the database; the fencing sequence comes from migrations.Up. New never
// closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("advisory: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	switch d {
	case sqllock.Postgres, sqllock.MySQL:
	case sqllock.SQLite:
		return nil, fmt.Errorf("advisory: %w: SQLite has no advisory locks; use tablelock", sqllock.ErrUnsupported)
	default:
		return nil, fmt.Errorf("advisory: %w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("advisory: %w", err)
		}
	}
	l := &Locker{db: db, dialect: d, cfg: cfg, q: buildQueries(d), keys: make(map[string]*entry)}
	l.sessions = make([]*session, cfg.sessions)
	for i := range l.sessions {
		l.sessions[i] = newSession(l)
	}
	return l, nil
}

// Namespace returns the prefix of the Locker's lock names.
func (l *Locker) Namespace() string { return l.cfg.namespace }

// Acquire blocks until key is held by the owner in ctx (or a fresh random
// owner) or ctx ends; then the error matches both sqllock.ErrNotAcquired and
// ctx.Err(). The wait holds no connection and queues nothing in the server.
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

func cancelled(m mode, key string, cause error) error {
	return errors.Join(fmt.Errorf("advisory: %s %q: %w", opName(m), key, sqllock.ErrNotAcquired), cause)
}

func (l *Locker) acquire(ctx context.Context, key string, m mode, wait bool) (sqllock.Lease, error) {
	op := opName(m)
	if err := sqllock.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	}
	if m == shared && l.dialect != sqllock.Postgres {
		return nil, fmt.Errorf("advisory: %s %q: %w: MySQL named locks have no shared mode", op, key, sqllock.ErrUnsupported)
	}
	owner, _, err := sqllock.ResolveOwner(ctx)
	if err != nil {
		return nil, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, cancelled(m, key, err)
	}
	id := l.lockID(key)
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, fmt.Errorf("advisory: %s %q: %w: locker closed", op, key, sqllock.ErrInvalidOption)
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
				lease := l.addLease(e, owner)
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
		case <-ctx.Done():
			return nil, cancelled(m, key, ctx.Err())
		}
	}
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
func (l *Locker) addLease(e *entry, owner string) *Lease {
	s := &Lease{l: l, e: e, key: e.key, owner: owner, token: e.token}
	e.leases[s] = struct{}{}
	return s
}

// remove drops e from the Locker and wakes whoever waits on it. Locker.mu held.
func (l *Locker) remove(e *entry) {
	if l.keys[e.key] == e {
		delete(l.keys, e.key)
	}
	close(e.changed)
}

// poll is run by the one caller that created e: it tries the server until it
// wins, is refused (without wait), fails or its context ends. Other callers
// of the Locker wait on e meanwhile, so a key costs one statement per
// backoff step however many goroutines wait for it.
func (l *Locker) poll(ctx context.Context, e *entry, wait bool) (sqllock.Lease, error) {
	op := opName(e.mode)
	giveUp := func() {
		l.mu.Lock()
		l.remove(e)
		l.mu.Unlock()
	}
	backoff := minBackoff
	// Queue before the first try, so a release between a refusal and the
	// sleep is not missed. A blocking Acquire that finds others of this
	// process queued waits its turn instead of barging in ahead of them.
	var wt *waitq.Waiter
	skip := false
	if wait {
		wt, skip = wakeups.Join(e.id.wake)
	}
	leave := func(acquired bool) { wakeups.Leave(e.id.wake, wt, acquired, false) }
	for {
		wake, _ := wakeups.Rearm(wt) // before the try: a wake during it must not be lost
		var lease *Lease
		closed := false
		var err error
		if !skip {
			err = e.sess.run(ctx, true, func(sctx context.Context, c *sql.Conn) error {
				// Close sets closed before it takes the session locks: checked
				// here, no lock can be taken after Close has cleaned up.
				l.mu.Lock()
				closed = l.closed
				l.mu.Unlock()
				if closed {
					return nil
				}
				tok, ok, err := l.try(sctx, e.sess, e.id, e.mode)
				if err != nil || !ok {
					return err
				}
				// Still under the session lock: a concurrent failure of the
				// session sees the entry held and ends it.
				e.sess.held++
				l.mu.Lock()
				e.state, e.token = stHeld, tok
				lease = l.addLease(e, e.owner)
				e.signal()
				l.mu.Unlock()
				return nil
			})
		}
		skip = false
		if lease != nil {
			leave(true)
			return lease, nil
		}
		if err != nil {
			switch {
			case ctx.Err() != nil:
				leave(false)
				giveUp()
				return nil, cancelled(e.mode, e.key, ctx.Err())
			case wait && sqlutil.IsRetryable(err):
				l.cfg.logger.Info("advisory: acquire failed, retrying", "key", e.key, "error", err.Error())
			default:
				leave(false)
				giveUp()
				return nil, fmt.Errorf("advisory: %s %q: %w", op, e.key, err)
			}
		}
		if !wait {
			giveUp()
			return nil, fmt.Errorf("advisory: %s %q: %w", op, e.key, sqllock.ErrNotAcquired)
		}
		l.mu.Lock()
		closed = closed || l.closed
		l.mu.Unlock()
		if closed {
			leave(false)
			giveUp()
			return nil, fmt.Errorf("advisory: %s %q: %w: locker closed", op, e.key, sqllock.ErrInvalidOption)
		}
		// Exponential backoff with full jitter, capped, for the head of the
		// queue; those behind it will be woken in turn and poll at the cap.
		d := l.cfg.maxBackoff
		if wakeups.First(e.id.wake, wt) {
			d = backoff
			backoff = min(2*backoff, l.cfg.maxBackoff)
		}
		timer := time.NewTimer(d/2 + rand.N(d/2+1))
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			leave(false)
			giveUp()
			return nil, cancelled(e.mode, e.key, ctx.Err())
		}
		timer.Stop()
	}
}

// try runs the try-lock statement, which issues the fencing token in the
// same statement, only once the lock is held. sem of s held.
func (l *Locker) try(ctx context.Context, s *session, id lockID, m mode) (token int64, ok bool, err error) {
	var tok sql.NullInt64
	switch {
	case l.dialect == sqllock.MySQL:
		var st *sql.Stmt
		if st, err = s.prepared(ctx, l.q.try); err == nil {
			err = st.QueryRowContext(ctx, id.name).Scan(&tok)
		}
	case m == shared:
		err = s.conn.QueryRowContext(ctx, l.q.tryShared, id.pg).Scan(&tok)
	default:
		err = s.conn.QueryRowContext(ctx, l.q.try, id.pg).Scan(&tok)
	}
	return tok.Int64, tok.Valid, err
}

// unlock runs the unlock statement; ok is false when the session did not
// hold the lock. sem of e.sess held.
func (l *Locker) unlock(ctx context.Context, e *entry) (ok bool, err error) {
	var res sql.NullBool
	s := e.sess
	switch {
	case l.dialect == sqllock.MySQL:
		var st *sql.Stmt
		if st, err = s.prepared(ctx, l.q.unlock); err == nil {
			err = st.QueryRowContext(ctx, e.id.name).Scan(&res)
		}
	case e.mode == shared:
		err = s.conn.QueryRowContext(ctx, l.q.unlockShared, e.id.pg).Scan(&res)
	default:
		err = s.conn.QueryRowContext(ctx, l.q.unlock, e.id.pg).Scan(&res)
	}
	return res.Valid && res.Bool, err
}

// loseSession ends every lock held on s. sem of s held.
func (l *Locker) loseSession(s *session, cause error) {
	l.mu.Lock()
	type lost struct {
		e   *entry
		err error
	}
	var ended []lost
	for _, e := range l.keys {
		if e.sess != s || e.state == stTrying {
			continue
		}
		e.lostErr = fmt.Errorf("%w: %v", sqllock.ErrLockLost, cause)
		ended = append(ended, lost{e, fmt.Errorf("advisory: lease %q (token %d): %w", e.key, e.token, e.lostErr)})
	}
	var leases []*Lease
	var errs []error
	for _, x := range ended {
		for s := range x.e.leases {
			leases = append(leases, s)
			errs = append(errs, x.err)
		}
		l.remove(x.e)
	}
	l.mu.Unlock()
	for i, s := range leases {
		s.st.End(errs[i])
	}
	for _, x := range ended {
		wakeups.Signal(x.e.id.wake)
	}
}

// Close releases every lock the Locker still holds (one unlock-all statement
// per pinned session) and ends those leases with sqllock.ErrLockLost;
// acquisitions afterwards fail. A session whose clean-up fails is closed,
// which frees its locks in the server too. Close never closes the *sql.DB.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for _, e := range l.keys {
		e.signal() // waiters re-check and see closed
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var errs []error
	for _, s := range l.sessions {
		err := s.run(ctx, false, func(sctx context.Context, c *sql.Conn) error {
			if _, err := c.ExecContext(sctx, l.q.unlockAll); err != nil {
				return err
			}
			s.held = 0
			l.loseSession(s, errors.New("the Locker was closed"))
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

// queries are the statements on pinned sessions. On MySQL they are
// prepared once per pinned connection.
type queries struct {
	try, tryShared, unlock, unlockShared string
	unlockAll                            string
	txLock, txTry                        string // PostgreSQL transaction level
}

func buildQueries(d sqllock.Dialect) queries {
	if d == sqllock.MySQL {
		return queries{
			// IF evaluates NEXTVAL only when GET_LOCK returned 1: the token
			// is drawn by the session that holds the lock, while it holds it.
			try:       "SELECT IF(GET_LOCK(?, 0) = 1, NEXTVAL(sqllock_fence_seq), NULL)",
			unlock:    "SELECT RELEASE_LOCK(?)",
			unlockAll: "SELECT RELEASE_ALL_LOCKS()",
		}
	}
	return queries{
		// CASE evaluates nextval only when the lock was granted.
		try:          "SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval('sqllock_fence_seq') END",
		tryShared:    "SELECT CASE WHEN pg_try_advisory_lock_shared($1) THEN nextval('sqllock_fence_seq') END",
		unlock:       "SELECT pg_advisory_unlock($1)",
		unlockShared: "SELECT pg_advisory_unlock_shared($1)",
		unlockAll:    "SELECT pg_advisory_unlock_all()",
		// OFFSET 0 keeps the planner from flattening the subquery, so the
		// lock is granted before nextval runs.
		txLock: "SELECT nextval('sqllock_fence_seq') FROM (SELECT pg_advisory_xact_lock($1) OFFSET 0) AS granted",
		txTry:  "SELECT CASE WHEN pg_try_advisory_xact_lock($1) THEN nextval('sqllock_fence_seq') END",
	}
}

// wakeups queues the blocked Acquires of this process per server lock, in
// arrival order, across all Lockers. A release here wakes one waiter, the
// first not already woken: waking all would send them to the server
// together for one winner. A waiter woken that gives up passes the wake on.
// Waiters also poll on a timer, for releases in other processes.
var wakeups = waitq.New(waitq.PerRelease)
