package tablelock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/sqlutil"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/waitq"
)

var _ sqllock.Locker = (*Locker)(nil)

// releaseTimeout bounds Release and the clean-up of a cancelled Acquire,
// which run detached from the caller's context.
const releaseTimeout = 5 * time.Second

// Locker hands out leases backed by rows of a lock table. It is safe for
// concurrent use. Close it when done to stop its PostgreSQL listener.
type Locker struct {
	db      *sql.DB
	dialect sqllock.Dialect
	cfg     config
	q       queries
	host    string
	stmts   *stmtcache.Cache // closed once the Locker is closed and holds nothing
	waiters *waitq.Queue
	ln      *listener      // nil unless PostgreSQL with notifications
	bg      sync.WaitGroup // give-backs of cancelled tries still in flight

	mu     sync.Mutex
	holds  map[holdID]*hold
	closed bool
}

// New returns a Locker over db for dialect d. It checks its options but does
// not touch the database; run migrations.Up first. New never closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("tablelock: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("tablelock: %w", err)
		}
	}
	if err := cfg.finish(); err != nil {
		return nil, fmt.Errorf("tablelock: %w", err)
	}
	q, err := buildQueries(d, cfg.table, cfg.asyncCommit && d == sqllock.Postgres)
	if err != nil {
		return nil, err
	}
	l := &Locker{
		db: db, dialect: d, cfg: cfg, q: q,
		host:  identity.Host(),
		stmts: new(stmtcache.Cache),
		holds: make(map[holdID]*hold),
		// A wake-up says "look again": several before a try count as one.
		waiters: waitq.New(waitq.Coalesce),
	}
	if d == sqllock.Postgres && cfg.notify {
		l.ln = newListener(db, q.channel, l.waiters, cfg.logger)
	}
	return l, nil
}

// Close stops the Locker's listener and refuses new acquisitions, and waits
// for cancelled Acquires to give back what their last statement took.
// Leases already held keep renewing until they are released; the prepared
// statements close when the last of them ends. Close never closes the
// *sql.DB.
func (l *Locker) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	if l.ln != nil {
		l.ln.close()
	}
	l.bg.Wait() // bounded by releaseTimeout
	l.closeStmtsIfIdle()
	return nil
}

// closeStmtsIfIdle closes the prepared statements once the Locker is closed
// and holds no lease that still renews or releases on them. A lease won by
// an Acquire that raced Close runs on one-use statements instead.
func (l *Locker) closeStmtsIfIdle() {
	l.mu.Lock()
	idle := l.closed && len(l.holds) == 0
	l.mu.Unlock()
	if idle {
		l.stmts.Close()
	}
}

// TTL is the lease length the Locker grants.
func (l *Locker) TTL() time.Duration { return l.cfg.ttl }

// Acquire blocks until key is held by the owner in ctx (or a fresh random
// owner) or ctx ends; then the error matches both sqllock.ErrNotAcquired and
// ctx.Err().
func (l *Locker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, true)
}

// TryAcquire takes key if it is free, expired or already held by the owner
// in ctx, and otherwise returns an error matching sqllock.ErrNotAcquired
// that names the holder's host.
func (l *Locker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, false)
}

// attempt is the outcome of one acquire statement.
type attempt struct {
	won       bool
	token     int64
	holds     int64
	host      string        // the holder's, when not won
	remaining time.Duration // the holder's lease left, when not won; <0 unknown
}

func (l *Locker) acquire(ctx context.Context, key string, wait bool) (sqllock.Lease, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("tablelock: acquire %q: %w", key, err)
	}
	owner, _, err := identity.Resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("tablelock: acquire %q: %w", key, err)
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("tablelock: acquire %q: %w: locker closed", key, sqllock.ErrInvalidOption)
	}
	if err := ctx.Err(); err != nil {
		return nil, cancelled(key, err)
	}

	listening := false
	if wait && l.ln != nil {
		// Subscribe before the first attempt so a release between a refused
		// attempt and the wait cannot be missed.
		if err := l.ln.subscribe(ctx); err == nil {
			listening = true
			defer l.ln.unsubscribe()
		} else if ctx.Err() != nil {
			return nil, cancelled(key, ctx.Err())
		}
	}

	// Blocking Acquires queue per key in arrival order, and a release wakes
	// only the head: waking every waiter would send them all to the row for
	// one winner. One joining behind others waits its turn instead of
	// barging in, unless its owner holds the key (reentry would wait for
	// itself). Joined before the first try, so a release between a refused
	// try and the wait is not missed.
	var wt *waitq.Waiter
	skip := false
	if wait {
		var ahead bool
		wt, ahead = l.waiters.Join(key)
		skip = ahead && !l.holding(key, owner)
	}
	// woke: wt took a wake-up and has not yet spent it on a completed try.
	// Leaving without the key then passes it on, so it is never lost.
	woke := false
	leave := func(acquired bool) { l.waiters.Leave(key, wt, acquired, woke) }
	backoff := time.Millisecond
	for tries := 0; ; tries++ {
		var wake <-chan struct{}
		// On SQLite a read before the write keeps pollers off the write
		// lock; a first try or one woken by a release expects a free key and
		// saves the read.
		precheck := wt == nil || tries > 0
		if wt != nil {
			var got bool
			wake, got = l.waiters.Rearm(wt)
			woke = woke || got
			precheck = precheck && !got
			// Woken before its first turn: it is its turn.
			skip = skip && !got
		}
		var a attempt
		var err error
		start := time.Now()
		if skip {
			skip = false
			a = attempt{remaining: -1}
		} else {
			a, err = l.tryDetached(ctx, key, owner, precheck)
		}
		if err == nil && a.won {
			leave(true)
			return l.newLease(key, owner, a, start), nil
		}
		if err != nil {
			switch {
			case ctx.Err() != nil:
				leave(false)
				return nil, cancelled(key, ctx.Err())
			case sqlutil.IsDeadlock(err) || sqlutil.IsLockNotAvailable(err):
				// MariaDB picks one of two racing inserters on a contended
				// key as a deadlock victim: the key is held elsewhere.
				a = attempt{remaining: -1}
				woke = false
			case sqlutil.IsRetryable(err):
				// Nothing learnt about the key: a wake-up taken stays unspent.
				a = attempt{remaining: -1, host: "unknown (database busy)"}
				if !wait {
					return nil, fmt.Errorf("tablelock: acquire %q: %w", key, err)
				}
			default:
				leave(false)
				return nil, fmt.Errorf("tablelock: acquire %q: %w", key, err)
			}
		} else {
			// Refused: the key is held, and its release will wake us again.
			woke = false
		}
		if !wait {
			return nil, notAcquired(key, a)
		}
		pause := l.pause(a, listening, &backoff, l.waiters.First(key, wt))
		timer := time.NewTimer(pause)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			leave(false)
			return nil, cancelled(key, ctx.Err())
		}
		timer.Stop()
	}
}

// tryDetached runs one try that the caller's cancellation cannot cut short
// on the server. Cancelling a statement in flight does not stop it from
// committing: a row could then stay taken, for a TTL, by an owner nobody
// knows. So the statement runs under its own timeout; a caller whose ctx
// ends first gets ctx.Err() at once, and what the statement took is given
// back as soon as it returns.
func (l *Locker) tryDetached(ctx context.Context, key, owner string, precheck bool) (attempt, error) {
	if ctx.Done() == nil {
		// Nothing can cancel it: no goroutine needed on this path.
		return l.try(ctx, key, owner, precheck)
	}
	type result struct {
		a   attempt
		err error
	}
	done := make(chan result, 1)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	go func() {
		defer cancel()
		a, err := l.try(sctx, key, owner, precheck)
		done <- result{a, err}
	}()
	select {
	case r := <-done:
		return r.a, r.err
	case <-ctx.Done():
		l.bg.Add(1)
		go func() {
			defer l.bg.Done()
			if r := <-done; r.err == nil && r.a.won {
				rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
				defer cancel()
				// One hold: a reentrant owner keeps the holds it had.
				_ = l.releaseRow(rctx, key, owner, r.a.token)
				l.waiters.Signal(key)
			}
		}()
		return attempt{}, ctx.Err()
	}
}

// holding reports whether owner holds key through this Locker.
func (l *Locker) holding(key, owner string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.holds[holdID{key, owner}]
	return ok
}

// pause is how long a refused waiter sleeps before its next attempt unless
// woken. With notifications it only guards against a holder that died
// without releasing (sleep until that lease would expire) and a lost
// notification. Without them, exponential backoff with full jitter, capped;
// from the cap for a waiter that is not the head of its key's queue.
func (l *Locker) pause(a attempt, listening bool, backoff *time.Duration, head bool) time.Duration {
	if listening && a.remaining >= 0 {
		// Jitter spreads the waiters that all wake at one expiry.
		return a.remaining + time.Millisecond + rand.N(2*time.Millisecond)
	}
	if listening {
		return 5*time.Millisecond + rand.N(10*time.Millisecond)
	}
	if !head {
		// Those behind the head are woken in turn by local releases; their
		// polling only covers releases elsewhere, so it starts at the cap.
		*backoff = l.cfg.maxBackoff
	}
	d := *backoff
	*backoff = min(2**backoff, l.cfg.maxBackoff)
	if a.remaining >= 0 && a.remaining < d {
		d = a.remaining + time.Millisecond
	}
	return d/2 + rand.N(d/2+1)
}

func cancelled(key string, cause error) error {
	return errors.Join(fmt.Errorf("tablelock: acquire %q: %w", key, sqllock.ErrNotAcquired), cause)
}

func notAcquired(key string, a attempt) error {
	if a.host == "" {
		return fmt.Errorf("tablelock: acquire %q: %w", key, sqllock.ErrNotAcquired)
	}
	if a.remaining >= 0 {
		return fmt.Errorf("tablelock: acquire %q: %w: held by %s for %v more", key, sqllock.ErrNotAcquired, a.host, a.remaining.Round(time.Millisecond))
	}
	return fmt.Errorf("tablelock: acquire %q: %w: held by %s", key, sqllock.ErrNotAcquired, a.host)
}

// try runs one acquire statement. precheck: on SQLite, read the row first
// and leave a live holder's key alone without taking the write lock.
func (l *Locker) try(ctx context.Context, key, owner string, precheck bool) (attempt, error) {
	ttl := l.cfg.ttl.Microseconds()
	var a attempt
	var remaining int64
	switch l.dialect {
	case sqllock.Postgres:
		st, put, err := l.stmts.Stmt(ctx, l.db, l.q.acquire)
		if err != nil {
			return a, err
		}
		defer put()
		err = st.QueryRowContext(ctx, key, owner, l.host, ttl).Scan(&a.won, &a.token, &a.holds, &a.host, &remaining)
		if errors.Is(err, sql.ErrNoRows) {
			// The holder's row is newer than this statement's snapshot.
			return attempt{remaining: -1}, nil
		}
		if err != nil {
			return a, err
		}
	case sqllock.MySQL:
		st, put, err := l.stmts.Stmt(ctx, l.db, l.q.acquire)
		if err != nil {
			return a, err
		}
		defer put()
		var rowOwner string
		if err := st.QueryRowContext(ctx, key, owner, l.host, ttl).Scan(&rowOwner, &a.token, &a.holds, &a.host, &remaining); err != nil {
			return a, err
		}
		a.won = rowOwner == owner
	case sqllock.SQLite:
		if err := l.trySQLite(ctx, key, owner, ttl, precheck, &a, &remaining); err != nil {
			return a, err
		}
	}
	if a.won {
		a.host = ""
		a.remaining = 0
	} else {
		a.remaining = time.Duration(max(remaining, 0)) * time.Microsecond
	}
	return a, nil
}

// trySQLite takes the key in one transaction with the bump of the fence
// row. Its statements are prepared once (per connection, by database/sql):
// parsing them on every call cost more than running them.
func (l *Locker) trySQLite(ctx context.Context, key, owner string, ttl int64, precheck bool, a *attempt, remaining *int64) (err error) {
	sts, put, err := l.stmts.StmtAll(ctx, l.db, l.q.holder, l.q.acquire, l.q.fence)
	if err != nil {
		return err
	}
	defer put()
	holderSt, acquireSt, fenceSt := sts[0], sts[1], sts[2]
	var holder string
	if precheck {
		// A read first: in WAL mode it takes no lock, so waiters polling a
		// held key do not queue for the single write lock ahead of the
		// holder's renewals and release.
		err = holderSt.QueryRowContext(ctx, key).Scan(&holder, &a.host, remaining)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case *remaining > 0 && holder != owner:
			return nil
		}
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	err = tx.StmtContext(ctx, acquireSt).QueryRowContext(ctx, key, owner, l.host, ttl).Scan(&a.won, &a.token, &a.holds, &a.host, remaining)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		a.won = false
		if err = tx.StmtContext(ctx, holderSt).QueryRowContext(ctx, key).Scan(&holder, &a.host, remaining); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if _, err = tx.StmtContext(ctx, fenceSt).ExecContext(ctx, a.token); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// ReleaseKey releases one hold of key by the owner in ctx (see
// sqllock.WithOwner), for a process that restarted with a persistent owner
// and no longer has the lease. It returns an error matching
// sqllock.ErrNotHeld, and changes nothing, when that owner does not hold
// key; owners compare byte for byte, as keys do.
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
	n, err := l.releaseOwned(ctx, key, owner)
	if err != nil {
		return fmt.Errorf("tablelock: release %q: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("tablelock: release %q: %w: owner %q", key, sqllock.ErrNotHeld, owner)
	}
	return nil
}

func (l *Locker) releaseOwned(ctx context.Context, key, owner string) (int64, error) {
	defer l.waiters.Signal(key)
	if l.dialect == sqllock.Postgres {
		return countRows(l.db.QueryContext(ctx, l.q.releaseKey, key, owner, l.q.channel))
	}
	res, err := l.db.ExecContext(ctx, l.q.releaseKey, key, owner)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ForceRelease frees key for an operator, if it is still held under token:
// the holder List showed, whose Info.Token names it. The holder is not told
// at once: its next renewal finds the row no longer its own and its lease
// ends with sqllock.ErrLockLost.
//
// It reports whether it freed the key: false, with a nil error, when key is
// not held any more. When key changed hands since (another holder, under
// another token), it frees nothing and returns an error matching
// sqllock.ErrNotHeld that names the holder now.
func (l *Locker) ForceRelease(ctx context.Context, key string, token int64) (bool, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return false, fmt.Errorf("tablelock: force release %q: %w", key, err)
	}
	if token <= 0 {
		return false, fmt.Errorf("tablelock: force release %q: %w: token %d names no holder (tokens start at 1)", key, sqllock.ErrInvalidOption, token)
	}
	var n int64
	var err error
	if l.dialect == sqllock.Postgres {
		n, err = countRows(l.db.QueryContext(ctx, l.q.forceRelease, key, token, l.q.channel))
	} else {
		var res sql.Result
		if res, err = l.db.ExecContext(ctx, l.q.forceRelease, key, token); err == nil {
			n, err = res.RowsAffected()
		}
	}
	if err != nil {
		return false, fmt.Errorf("tablelock: force release %q: %w", key, err)
	}
	if n > 0 {
		l.waiters.Signal(key)
		return true, nil
	}
	var current int64
	var owner, host string
	err = l.db.QueryRowContext(ctx, l.q.holding, key).Scan(&current, &owner, &host)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("tablelock: force release %q: nothing released (token %d does not hold it): %w", key, token, err)
	}
	return false, fmt.Errorf("tablelock: force release %q: %w: held under token %d now, not %d (owner %q, host %s); nothing released",
		key, sqllock.ErrNotHeld, current, token, owner, host)
}

// Info describes one held lock, as List reports it.
type Info struct {
	Key        string
	Owner      string
	Host       string // hostname/pid of the process that took it
	Holds      int    // reentrant hold count
	Token      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	HeldFor    time.Duration // on the database clock
}

// List returns the locks held now, by key.
func (l *Locker) List(ctx context.Context) ([]Info, error) {
	rows, err := l.db.QueryContext(ctx, l.q.list)
	if err != nil {
		return nil, fmt.Errorf("tablelock: list: %w", err)
	}
	defer rows.Close()
	var out []Info
	for rows.Next() {
		var in Info
		var held int64
		var acq, exp any
		if err := rows.Scan(&in.Key, &in.Owner, &in.Host, &in.Holds, &in.Token, &acq, &exp, &held); err != nil {
			return nil, fmt.Errorf("tablelock: list: %w", err)
		}
		in.AcquiredAt, in.ExpiresAt = sqlutil.ToTime(acq), sqlutil.ToTime(exp)
		in.HeldFor = time.Duration(held) * time.Microsecond
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tablelock: list: %w", err)
	}
	return out, nil
}

// countRows drains a result set and counts its rows.
func countRows(rows *sql.Rows, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}
