package rowlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/sessionwatch"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/telemetry"
)

var (
	_ sqllock.Locker = (*Locker)(nil)
	_ io.Closer      = (*Locker)(nil)
)

// errClosing is the cause with which Close ends the attempts in flight.
var errClosing = errors.New("rowlock: the Locker is closing")

// Locker hands out leases backed by row locks held in open transactions.
// It is safe for concurrent use. Close ends what it still holds (see the
// package doc).
type Locker struct {
	db    *sql.DB
	d     sqllock.Dialect
	st    store
	srv   *server.Check // nil where the dialect probes no server
	cfg   config
	stmts stmtcache.Cache
	// bg counts the attempts in flight and the background work they and
	// the monitor start; Close waits for all of it. Add only under mu while
	// not closed, or from work already counted.
	bg sync.WaitGroup

	mu     sync.Mutex
	closed bool
	mon    monitor
	// inflight ends the context of each acquisition in flight; Close calls
	// them. (A map under mu, which acquire takes anyway: cheaper than an
	// AfterFunc per acquisition on a context that Close cancels.)
	inflight map[context.Context]context.CancelCauseFunc
	// discarded are the sessions whose connections were discarded since
	// Close began: their transactions end only when the server notices.
	discarded []holder
	tel       *telemetry.T
}

// New returns a Locker over db for dialect d. It checks its options but does
// not touch the database; run migrations.Up first. On SQLite it returns an
// error matching sqllock.ErrUnsupported: use tablelock there. New never
// closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("rowlock: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	dl, err := dialectOf(d, "rowlock: ")
	if err != nil {
		return nil, err
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("rowlock: %w", err)
		}
	}
	t, err := dl.quote(cfg.table)
	if err != nil {
		return nil, fmt.Errorf("rowlock: table: %w", err)
	}
	l := &Locker{db: db, d: d, srv: server.New(db, d, cfg.singleWriter), cfg: cfg, inflight: make(map[context.Context]context.CancelCauseFunc),
		tel: telemetry.New("rowlock", d.String(), cfg.tel)}
	l.cfg.logger = telemetry.Logger(cfg.logger, "rowlock", d.String())
	l.stmts.Direct = cfg.pooler
	l.st = dl.newStore(t, storeEnv{db: db, stmts: &l.stmts, bg: &l.bg})
	return l, nil
}

// Close ends the Locker, as the package doc says: it refuses later
// acquisitions with sqllock.ErrClosed, stops the Acquires in flight (their
// waits end on the server too, and a lock granted meanwhile is given
// back), rolls back the transactions of the leases it holds and ends those
// leases as lost, waits until the sessions it discarded are gone from the
// server, stops its monitor and closes its prepared statements. A lease's
// rollback waits for a statement its holder still runs in the transaction;
// the loss is reported first, so sqllock.Do has cancelled that statement's
// context already. Close returns an error only when a discarded session
// outlives its 5s wait; the Locker is closed all the same. It never
// closes the *sql.DB; later calls return nil.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	held := l.mon.stopAll()
	for _, cancel := range l.inflight {
		cancel(errClosing)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range held {
		if s.base.Lose(s.base.Lost("the Locker was closed")) {
			wg.Go(func() { l.closeAttempt(s.a, false) })
		}
	}
	wg.Wait()
	l.bg.Wait()
	l.mu.Lock()
	discarded := l.discarded
	l.discarded = nil
	l.mu.Unlock()
	err := l.awaitGone(discarded)
	l.stmts.Close()
	if err != nil {
		return fmt.Errorf("rowlock: close: %w", err)
	}
	return nil
}

// closeAttempt closes a, and records its session if it was discarded
// while Close runs.
func (l *Locker) closeAttempt(a *attempt, bad bool) {
	if !a.close(bad) || a.holder.session == 0 {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.discarded = append(l.discarded, a.holder)
	}
	l.mu.Unlock()
}

// awaitGone waits until the server has ended sessions, whose connections
// the Locker discarded (a stopped wait, a failed rollback): until then a
// lock one of them was granted meanwhile stays held, and Close promises
// the keys free. A discarded session ends within milliseconds (pgx sends a
// cancel request and closes it; on MariaDB the Locker killed it).
func (l *Locker) awaitGone(sessions []holder) error {
	if len(sessions) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
	defer cancel()
	pause := backoff.Exp{Min: time.Millisecond, Max: 50 * time.Millisecond}
	for {
		gone, err := l.st.gone(ctx, sessions)
		if gone {
			return nil
		}
		if backoff.Sleep(ctx, pause.Next()) != nil {
			if err == nil {
				err = fmt.Errorf("%d discarded sessions still on the server after %v", len(sessions), lease.ReleaseTimeout)
			}
			return err
		}
	}
}

// Acquire blocks until key is held or ctx ends; then the error matches both
// sqllock.ErrNotAcquired and ctx.Err(). The wait happens in the database's
// own lock queue, and a cancelled wait is stopped on the server too. The
// lease pins one pooled connection until it is released.
//
// Acquire is not reentrant: a second Acquire of a key this process already
// holds waits for the first lease to end, whatever owner the context names.
func (l *Locker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, []string{key}, true, false)
}

// TryAcquire takes key if no transaction holds it (FOR UPDATE NOWAIT), and
// otherwise returns at once an error matching sqllock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, []string{key}, false, false)
}

// AcquireShared blocks until key is held in shared mode (SELECT ... FOR
// SHARE on PostgreSQL, LOCK IN SHARE MODE on MariaDB) or ctx ends. Shared
// holders overlap; an Acquire (FOR UPDATE) waits until every one has
// ended, and shared holders wait for it. Each shared lease has a token of
// its own, drawn after its lock is granted: so a writer's token, drawn
// once every earlier reader is gone, is larger than all of theirs. The
// lease's Tx reads under the lock; it must not write the lock row. The
// database queues a writer behind the readers already granted, but not
// ahead of readers that come later: a steady stream of overlapping
// readers can keep a writer waiting (package rwlock prefers writers).
func (l *Locker) AcquireShared(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, []string{key}, true, true)
}

// TryAcquireShared takes key in shared mode if no transaction holds it
// for update (NOWAIT), and otherwise returns at once an error matching
// sqllock.ErrNotAcquired. On the MySQL dialect it returns an error
// matching sqllock.ErrUnsupported: MySQL 8 (FOR SHARE NOWAIT) and MariaDB
// (LOCK IN SHARE MODE NOWAIT) share no syntax for it; choose the MariaDB
// dialect on MariaDB, or call AcquireShared with a deadline.
func (l *Locker) TryAcquireShared(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, []string{key}, false, true)
}

var _ sqllock.SetLocker = (*Locker)(nil)

// AcquireSet takes every key of keys in one transaction, in ascending
// order, and returns one Lease over all of them: its Tx holds every row
// lock, so the work done there commits (Release) or rolls back with all
// the keys at once, and TxFrom finds it inside sqllock.DoAll.
// sqllock.AcquireAll, TryAcquireAll and DoAll call it for a rowlock
// Locker; call those rather than this. The set pins one connection,
// whatever its size. Its token, the last drawn (after every lock was
// granted), fences the resources of every key: all of them are freed
// together, when the transaction ends.
func (l *Locker) AcquireSet(ctx context.Context, keys []string) (sqllock.Lease, error) {
	return l.acquire(ctx, keys, true, false)
}

// TryAcquireSet is AcquireSet with NOWAIT: it takes every key or none, and
// returns an error matching sqllock.ErrNotAcquired that names the first
// key held elsewhere.
func (l *Locker) TryAcquireSet(ctx context.Context, keys []string) (sqllock.Lease, error) {
	return l.acquire(ctx, keys, false, false)
}

// label names keys in messages: one key quoted, a set as a quoted list.
func label(keys []string) string {
	if len(keys) == 1 {
		return strconv.Quote(keys[0])
	}
	return fmt.Sprintf("%q", keys)
}

func (l *Locker) acquire(ctx context.Context, keys []string, wait, shared bool) (sqllock.Lease, error) {
	name := label(keys)
	if len(keys) == 1 {
		name = keys[0]
	}
	tctx, obs := l.tel.StartAcquire(ctx, name, wait)
	tries := 0
	s, err := l.take(tctx, keys, wait, shared, &tries)
	if err != nil {
		lease.EndAcquire(tctx, obs, nil, tries, err)
		return nil, err
	}
	lease.EndAcquire(tctx, obs, s, tries, nil)
	return s, nil
}

// take is acquire's work; it counts its attempts in tries.
func (l *Locker) take(ctx context.Context, keys []string, wait, shared bool, tries *int) (*Lease, error) {
	name := label(keys)
	if len(keys) == 0 {
		return nil, fmt.Errorf("rowlock: acquire: %w: no keys", sqllock.ErrInvalidKey)
	}
	for i, key := range keys {
		if err := sqllock.ValidateKey(key); err != nil {
			return nil, fmt.Errorf("rowlock: acquire %q: %w", key, err)
		}
		if i > 0 && keys[i-1] >= key {
			// One order for every transaction is what keeps sets from
			// deadlocking: the caller (sqllock.AcquireAll) sorts them.
			return nil, fmt.Errorf("rowlock: acquire %s: %w: keys must be distinct and in ascending order", name, sqllock.ErrInvalidKey)
		}
	}
	if err := l.srv.Check(ctx); err != nil {
		return nil, fmt.Errorf("rowlock: acquire %s: %w", name, err)
	}
	if err := ctxend.Err(ctx); err != nil {
		return nil, cancelled(name, err)
	}
	// Close ends the attempt as the end of ctx would: pool waits, lock
	// waits and the server's cancel all follow the context.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, closedErr(name, false)
	}
	l.bg.Add(1)
	l.inflight[ctx] = cancel
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.inflight, ctx)
		l.mu.Unlock()
		l.bg.Done()
	}()
	for {
		*tries++
		s, retry, err := l.attempt(ctx, keys, wait, shared)
		switch {
		case err != nil:
			return nil, err
		case retry:
			// A key's row was missing and has been created; lock them now.
			continue
		}
		if !l.watch(s) {
			// Granted while Close ran: give the keys back.
			s.base.Drop()
			l.closeAttempt(s.a, false)
			return nil, closedErr(name, true)
		}
		return s, nil
	}
}

// attempt pins a connection, opens a transaction and tries to lock the
// keys' rows, in order. retry reports that a row was missing and has been
// created since.
func (l *Locker) attempt(ctx context.Context, keys []string, wait, shared bool) (s *Lease, retry bool, err error) {
	name := label(keys)
	var sts []*sql.Stmt
	if !l.stmts.Direct {
		var put func()
		sts, put, err = l.stmts.StmtAll(ctx, l.db, l.st.queries()...)
		if err != nil {
			return nil, false, l.failed(ctx, name, fmt.Errorf("prepare: %w", err))
		}
		defer put()
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		if ctxend.Err(ctx) != nil && context.Cause(ctx) != errClosing {
			// Say why it waited: a pool too small for the leases held is the
			// usual cause, and a bare deadline would hide it.
			st := l.db.Stats()
			return nil, false, errors.Join(fmt.Errorf("rowlock: acquire %s: %w: no pooled connection came free (%d open, %d in use, limit %d); each held lease pins one",
				name, sqllock.ErrNotAcquired, st.OpenConnections, st.InUse, st.MaxOpenConnections), ctxend.Err(ctx))
		}
		return nil, false, l.failed(ctx, name, err)
	}
	// The transaction lives as long as the lease, not as long as ctx:
	// database/sql rolls a transaction back when its context ends.
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &attempt{conn: conn, cancel: cancel, stmts: sts, queries: l.st.queries(), shared: shared}
	if a.holder, err = l.st.session(ctx, conn); err != nil {
		// No transaction yet: a discarded connection holds nothing.
		a.close(ctxend.Err(ctx) != nil)
		return nil, false, l.failed(ctx, name, err)
	}
	if a.tx, err = conn.BeginTx(txCtx, nil); err != nil {
		l.closeAttempt(a, false)
		return nil, false, l.failed(ctx, name, err)
	}
	var set grant
	for _, key := range keys {
		g, retry, err := l.st.lock(ctx, a, key, wait)
		if err != nil || retry || ctxend.Err(ctx) != nil {
			// A grant that raced a cancel is not reported as held: the
			// caller has given up on it. The connection may still be hit
			// by the cancel: discard it. A missing row ends the whole
			// attempt: the next one locks every key again, in order.
			l.closeAttempt(a, ctxend.Err(ctx) != nil)
			if retry && err == nil && ctxend.Err(ctx) == nil {
				return nil, true, nil
			}
			if err == nil {
				err = ctxend.Err(ctx)
			}
			return nil, false, l.failed(ctx, strconv.Quote(key), err)
		}
		// Drawn one after another on one session: the last is the
		// largest, and drawn while every key is held.
		set = grant{token: max(set.token, g.token), holder: g.holder}
	}
	a.stmts = nil // given back by put
	s = newLease(l, a, keys, set)
	// Before the session watch is armed: a loss it reports ends the lease's
	// telemetry, which must have begun.
	s.base.Observe(ctx, l.tel)
	// Told within microseconds when the server closes the session (a kill,
	// a crash), where the monitor needs up to two check intervals. A close
	// before this line is reported at once too.
	armed := make(chan struct{}) // a.watch is set before the report reads it
	a.watch = sessionwatch.Conn(conn, func() {
		<-armed
		s.lose("the server closed its session")
	})
	close(armed)
	return s, false, nil
}

// close rolls back and returns the connection to the pool; bad discards
// it, for a connection a cancel may still hit. A connection whose rollback
// failed is discarded too. It reports whether it discarded the connection.
func (a *attempt) close(bad bool) bool {
	a.watch.Stop()
	if a.tx != nil {
		if err := a.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			bad = true
		}
	}
	a.cancel()
	if bad {
		_ = a.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = a.conn.Close()
	return bad
}

// failed classifies an attempt's error: the Locker closing, a cancelled
// context, a refusal, or a database error, each naming the key (name is
// quoted already).
func (l *Locker) failed(ctx context.Context, name string, err error) error {
	switch {
	case context.Cause(ctx) == errClosing:
		return closedErr(name, true)
	case ctxend.Err(ctx) != nil:
		return cancelled(name, ctxend.Err(ctx))
	case errors.Is(err, errRefused):
		return fmt.Errorf("rowlock: acquire %s: %w: the row is locked by another transaction", name, sqllock.ErrNotAcquired)
	}
	return fmt.Errorf("rowlock: acquire %s: %w", name, err)
}

func cancelled(name string, cause error) error {
	return errors.Join(fmt.Errorf("rowlock: acquire %s: %w", name, sqllock.ErrNotAcquired), cause)
}

// closedErr is the error of an acquisition refused by a closed Locker;
// stopped: it was in flight when Close came, and did not get the key.
func closedErr(name string, stopped bool) error {
	if stopped {
		return fmt.Errorf("rowlock: acquire %s: %w: %w", name, sqllock.ErrNotAcquired, sqllock.ErrClosed)
	}
	return fmt.Errorf("rowlock: acquire %s: %w", name, sqllock.ErrClosed)
}
