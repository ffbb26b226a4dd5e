package rowlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

var _ sqllock.Locker = (*Locker)(nil)

// cancelTimeout bounds the KILL that stops a cancelled MariaDB wait.
const cancelTimeout = 5 * time.Second

// Locker hands out leases backed by row locks held in open transactions.
// It is safe for concurrent use.
type Locker struct {
	db       *sql.DB
	dialect  sqllock.Dialect
	cfg      config
	q        queries
	stmts    *stmtcache.Cache
	mon      monitor
	sessions sessions // MariaDB only

	mu     sync.Mutex
	closed bool
}

// New returns a Locker over db for dialect d. It checks its options but does
// not touch the database; run migrations.Up first. On SQLite it returns an
// error matching sqllock.ErrUnsupported: use tablelock there. New never
// closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("rowlock: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("rowlock: %w", err)
		}
	}
	q, err := buildQueries(d, cfg.table)
	if err != nil {
		return nil, err
	}
	l := &Locker{db: db, dialect: d, cfg: cfg, q: q, stmts: new(stmtcache.Cache)}
	l.mon.l = l
	return l, nil
}

// Close refuses new acquisitions and closes the prepared statements (those
// of an Acquire in flight once it returns). Leases already held stay held,
// and watched, until they are released: they need no statement. Close never
// closes the *sql.DB.
func (l *Locker) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stmts.Close()
	return nil
}

// Acquire blocks until key is held or ctx ends; then the error matches both
// sqllock.ErrNotAcquired and ctx.Err(). The wait happens in the database's
// own lock queue, and a cancelled wait is stopped on the server too. The
// lease pins one pooled connection until it is released.
//
// Acquire is not reentrant: a second Acquire of a key this process already
// holds waits for the first lease to end, whatever owner the context names.
func (l *Locker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, true)
}

// TryAcquire takes key if no transaction holds it (FOR UPDATE NOWAIT), and
// otherwise returns at once an error matching sqllock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key, false)
}

func (l *Locker) acquire(ctx context.Context, key string, wait bool) (sqllock.Lease, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("rowlock: acquire %q: %w", key, err)
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("rowlock: acquire %q: %w: locker closed", key, sqllock.ErrInvalidOption)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, cancelled(key, err)
		}
		s, retry, err := l.attempt(ctx, key, wait)
		switch {
		case err != nil:
			return nil, err
		case retry:
			// The key's row was missing and has been created; lock it now.
			continue
		}
		l.mon.add(s)
		return s, nil
	}
}

// pinned is the connection and transaction of one attempt.
type pinned struct {
	conn   *sql.Conn
	tx     *sql.Tx
	cancel context.CancelFunc // ends the transaction's context
}

// close rolls back and returns the connection to the pool; bad discards it,
// for a connection a cancel request may still hit.
func (p *pinned) close(bad bool) {
	if p.tx != nil {
		_ = p.tx.Rollback()
	}
	p.cancel()
	if bad {
		_ = p.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = p.conn.Close()
}

// attempt pins a connection, opens a transaction and tries to lock key's
// row. retry reports that the row was missing and has been created since.
func (l *Locker) attempt(ctx context.Context, key string, wait bool) (s *Lease, retry bool, err error) {
	// Prepare before pinning: preparing takes a pooled connection of its
	// own, which a small pool may not have while this attempt holds one.
	st, put, err := l.prepare(ctx)
	if err != nil {
		return nil, false, l.failed(ctx, key, err)
	}
	defer put()
	conn, err := l.db.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Say why it waited: a pool too small for the leases held is the
			// usual cause, and a bare deadline would hide it.
			st := l.db.Stats()
			return nil, false, errors.Join(fmt.Errorf("rowlock: acquire %q: %w: no pooled connection came free (%d open, %d in use, limit %d); each held lease pins one",
				key, sqllock.ErrNotAcquired, st.OpenConnections, st.InUse, st.MaxOpenConnections), ctx.Err())
		}
		return nil, false, l.failed(ctx, key, err)
	}
	// The transaction lives as long as the lease, not as long as ctx:
	// database/sql rolls a transaction back when its context ends.
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &pinned{conn: conn, cancel: cancel}
	var sess session
	if l.dialect == sqllock.MySQL {
		// Before the transaction, whose first statement stays the locking
		// read.
		if sess, err = l.sessions.get(ctx, conn, l.q.session); err != nil {
			p.close(ctx.Err() != nil)
			return nil, false, l.failed(ctx, key, err)
		}
	}
	if p.tx, err = conn.BeginTx(txCtx, nil); err != nil {
		p.tx = nil
		p.close(false)
		return nil, false, l.failed(ctx, key, err)
	}
	var h grant
	var bad bool
	if l.dialect == sqllock.Postgres {
		h, retry, bad, err = l.lockPostgres(ctx, p, st, key, wait)
	} else {
		h, retry, bad, err = l.lockMySQL(ctx, p, st, key, wait, sess)
	}
	if err != nil || retry || ctx.Err() != nil {
		// A grant that raced a cancel is not reported as held: the caller
		// has given up on it.
		p.close(bad || ctx.Err() != nil)
		if retry && err == nil && ctx.Err() == nil {
			return nil, true, nil
		}
		if err == nil {
			err = ctx.Err()
		}
		return nil, false, l.failed(ctx, key, err)
	}
	return newLease(l, p, key, h.token, h.session, h.life), false, nil
}

// grant is what a lock statement returns: the token and the holder's
// identity (Lease.session, Lease.life).
type grant struct{ token, session, life int64 }

// failed classifies an attempt's error: a cancelled context, a refusal, or
// a database error, each naming the key.
func (l *Locker) failed(ctx context.Context, key string, err error) error {
	switch {
	case ctx.Err() != nil:
		return cancelled(key, ctx.Err())
	case errors.Is(err, errRefused):
		return fmt.Errorf("rowlock: acquire %q: %w: the row is locked by another transaction", key, sqllock.ErrNotAcquired)
	}
	return fmt.Errorf("rowlock: acquire %q: %w", key, err)
}

// errRefused marks a NOWAIT refusal inside the package.
var errRefused = errors.New("refused")

func cancelled(key string, cause error) error {
	return errors.Join(fmt.Errorf("rowlock: acquire %q: %w", key, sqllock.ErrNotAcquired), cause)
}

func (l *Locker) lockPostgres(ctx context.Context, p *pinned, st *stmts, key string, wait bool) (h grant, retry, bad bool, err error) {
	if wait {
		// A cancelled wait ends on the server too: pgx (like lib/pq) sends
		// a cancel request when a query's context ends, and the attempt's
		// connection is then discarded.
		err = p.tx.StmtContext(ctx, st.lock).QueryRowContext(ctx, key).Scan(&h.token, &h.session, &h.life)
		if ctx.Err() != nil {
			return grant{}, false, true, ctx.Err()
		}
		if err == nil && h.token == 0 {
			// This transaction created the row, and holds it: draw the token.
			err = p.tx.StmtContext(ctx, st.stamp).QueryRowContext(ctx, key).Scan(&h.token)
		}
		return h, false, false, err
	}
	err = p.tx.StmtContext(ctx, st.tryLock).QueryRowContext(ctx, key).Scan(&h.token, &h.session, &h.life)
	switch {
	case err == nil:
		return h, false, false, nil
	case sqlutil.IsLockNotAvailable(err):
		return grant{}, false, false, errRefused
	case !errors.Is(err, sql.ErrNoRows):
		return grant{}, false, false, err
	}
	// No committed row: create it in this transaction, waiting only briefly
	// on another transaction's uncommitted insert of the same key.
	var prev, set string
	if err := p.tx.QueryRowContext(ctx, l.q.tryPrepare).Scan(&prev, &set); err != nil {
		return grant{}, false, false, err
	}
	var zero int64
	err = p.tx.StmtContext(ctx, st.tryInsert).QueryRowContext(ctx, key).Scan(&zero)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return grant{}, true, false, nil // committed by someone else meanwhile
	case sqlutil.IsLockNotAvailable(err):
		return grant{}, false, false, errRefused
	case err != nil:
		return grant{}, false, false, err
	}
	err = p.tx.StmtContext(ctx, st.stampRestore).QueryRowContext(ctx, key, prev).Scan(&h.token, &h.session, &h.life, &set)
	return h, false, false, err
}

func (l *Locker) lockMySQL(ctx context.Context, p *pinned, st *stmts, key string, wait bool, sess session) (h grant, retry, bad bool, err error) {
	h.session, h.life = sess.id, sess.start
	if !wait {
		err = p.tx.StmtContext(ctx, st.lockNoWait).QueryRowContext(ctx, key).Scan(&h.token)
		switch {
		case err == nil:
			return h, false, false, nil
		case errors.Is(err, sql.ErrNoRows):
			return grant{}, true, false, l.ensureRow(ctx, p, key)
		case sqlutil.IsLockNotAvailable(err):
			return grant{}, false, false, errRefused
		}
		return grant{}, false, false, err
	}
	// Wait in the server's queue, in bounded rounds. The driver gives up a
	// cancelled query by closing its socket, which a session blocked on a
	// row lock does not notice: kill the session on the server too.
	self := sess.id
	stop := context.AfterFunc(ctx, func() { l.killSession(self) })
	for {
		err = p.tx.StmtContext(ctx, st.lockWait).QueryRowContext(ctx, key).Scan(&h.token)
		if err == nil || !sqlutil.IsLockNotAvailable(err) || ctx.Err() != nil {
			break
		}
		// One round of WAIT timed out (only the statement was rolled back);
		// queue again.
	}
	if stopped := stop(); !stopped || ctx.Err() != nil {
		if stopped {
			// ctx ended but stop won the race with AfterFunc's start: the
			// kill would never be sent.
			go l.killSession(self)
		}
		// The kill may be on its way to this session: discard it.
		return grant{}, false, true, ctx.Err()
	}
	switch {
	case err == nil:
		return h, false, false, nil
	case errors.Is(err, sql.ErrNoRows):
		return grant{}, true, false, l.ensureRow(ctx, p, key)
	}
	return grant{}, false, false, err
}

// sessions caches, per pooled MariaDB connection, its connection id and the
// start of the server it is connected to. A connection lives within one
// server life, so both are read once, by its first attempt. The id is the
// session a cancelled blocking Acquire kills; id and start together tell
// the monitor a lease's session from a later one with a reused id.
type sessions struct {
	mu sync.Mutex
	m  map[any]session // by driver connection
}

// session is what sessions holds for one connection.
type session struct{ id, start int64 }

// maxSessions bounds the cache: entries of closed connections are dropped
// wholesale when it fills.
const maxSessions = 1024

func (c *sessions) get(ctx context.Context, conn *sql.Conn, query string) (session, error) {
	var dc any
	_ = conn.Raw(func(d any) error { dc = d; return nil })
	c.mu.Lock()
	s, ok := c.m[dc]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	if err := conn.QueryRowContext(ctx, query).Scan(&s.id, &s.start); err != nil {
		return session{}, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSessions {
		c.m = make(map[any]session)
	}
	c.m[dc] = s
	c.mu.Unlock()
	return s, nil
}

// ensureRow ends the attempt's transaction (its locking read of a missing
// row took a gap lock, which would block other keys' inserts) and creates
// the row in its own statement. A lock-wait refusal means the row exists
// and is held: the next attempt waits for it properly.
func (l *Locker) ensureRow(ctx context.Context, p *pinned, key string) error {
	_ = p.tx.Rollback()
	p.tx = nil
	_, err := p.conn.ExecContext(ctx, l.q.ensure, key)
	if err != nil && !sqlutil.IsLockNotAvailable(err) {
		return err
	}
	return nil
}

// killSession ends MariaDB connection id, on whose socket the driver gave
// up. Killing the session rather than the query also catches a statement
// still on its way to the server when the kill arrives; the attempt
// discards the connection anyway.
func (l *Locker) killSession(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	_, _ = l.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
}

// stmts are a Locker's prepared statements for its dialect.
type stmts struct {
	lock, stamp, tryLock, tryInsert, stampRestore *sql.Stmt // PostgreSQL
	lockNoWait, lockWait                          *sql.Stmt // MariaDB
}

// prepare returns the statements of an attempt, and put, to call when the
// attempt is over.
func (l *Locker) prepare(ctx context.Context) (*stmts, func(), error) {
	var s stmts
	var dst []**sql.Stmt
	var queries []string
	if l.q.lock != "" {
		dst = []**sql.Stmt{&s.lock, &s.stamp, &s.tryLock, &s.tryInsert, &s.stampRestore}
		queries = []string{l.q.lock, l.q.stamp, l.q.tryLock, l.q.tryInsert, l.q.stampRestore}
	} else {
		dst = []**sql.Stmt{&s.lockNoWait, &s.lockWait}
		queries = []string{l.q.lockNoWait, l.q.lockWait}
	}
	sts, put, err := l.stmts.StmtAll(ctx, l.db, queries...)
	if err != nil {
		return nil, nil, fmt.Errorf("prepare: %w", err)
	}
	for i, st := range sts {
		*dst[i] = st
	}
	return &s, put, nil
}
