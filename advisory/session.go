package advisory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock/internal/sessionwatch"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// stmtTimeout is how long a statement on a pinned session may run before the
// checker declares the session's locks lost. The statements are try-locks
// and unlocks that never wait in the server, so one that runs this long
// means the session is in trouble. (They run without a context deadline:
// a cancellable context costs a goroutine handoff per statement in
// database/sql and the drivers, about 15% of an uncontended Acquire.)
const stmtTimeout = 5 * time.Second

// errNoSession: the session has no connection (it failed, or holds nothing).
var errNoSession = errors.New("advisory: session not pinned")

// session is one pinned database connection that holds many locks. Its
// statements run one at a time under sem, a channel so a caller waiting for
// its turn can give up when its context ends.
type session struct {
	l   *Locker
	sem chan struct{}

	mu        sync.Mutex
	busySince time.Time // when the running statement started; zero when idle
	doomed    string    // why this connection's locks were declared lost; empty while they are not
	live      uint64    // gen of the pinned connection; 0 when none is

	// Guarded by sem.
	conn     *sql.Conn
	held     int  // locks held on conn: entries in stHeld or stReleasing
	everHeld bool // conn has held a lock since it was pinned
	lastUse  time.Time
	gen      uint64
	stmts    *stmtcache.Cache // statements prepared on conn, closed with it
	stop     chan struct{}    // closed to end the current conn's checker
	watch    *sessionwatch.Watch
	armed    bool         // watch looks at what arrives on the idle socket (Idle), not only its close (Busy)
	backend  atomic.Int64 // the server's id of conn, on a wait session
	hi       tokenHigh    // conn's token era or timeline (pgToken)
	pgx      bool         // conn is pgx's: statements go to it directly

	assigned bool // a wait session serving an entry; guarded by Locker.mu
}

func newSession(l *Locker) *session {
	return &session{l: l, sem: make(chan struct{}, 1)}
}

func (s *session) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) unlock() { <-s.sem }

// run calls fn under the session lock, with the session's connection
// pinned: fn runs its statements through queryRow. A session without a
// connection pins one from the pool when pin is set and the Locker is not
// closed, and otherwise returns errNoSession or errClosed. ctx bounds only
// the wait for the lock and for a connection. fn's statements get a
// context of their own, detached from ctx: cancelling a statement can close
// its connection (go-sql-driver/mysql does), and closing it would end every
// lock on the session. Any error from fn fails the session: after an error
// nobody can tell which locks the server still holds on it, and closing it
// settles that. A session left holding nothing goes back to the pool at
// once.
func (s *session) run(ctx context.Context, pin bool, fn func(ctx context.Context) error) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	if s.conn != nil {
		// The server closed the connection while it was idle: its locks
		// are reported lost already; discard it before it fails a statement.
		if doomed := s.doomedCause(); doomed != "" {
			s.fail(errors.New(doomed))
		}
	}
	if s.conn == nil {
		if !pin {
			return errNoSession
		}
		// Close marks the Locker closed before it takes the session locks:
		// no connection, and no checker, is pinned after it has cleaned up.
		if s.l.isClosed() {
			return errClosed
		}
		if err := s.pin(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.busySince = time.Now()
	s.mu.Unlock()
	err := fn(context.Background())
	s.mu.Lock()
	s.busySince = time.Time{}
	doomed := s.doomed
	s.mu.Unlock()
	if err == nil && doomed != "" {
		err = errors.New(doomed)
	}
	if err != nil {
		s.fail(err)
		return err
	}
	s.lastUse = time.Now()
	s.rearm()
	if s.held > 0 {
		s.everHeld = true
	} else if !s.everHeld && s.conn != nil {
		s.unpin() // pinned only for attempts that failed: give it back now
	}
	return nil
}

// pin takes a connection from the pool and starts its checker. sem held.
func (s *session) pin(ctx context.Context) error {
	c, err := s.l.db.Conn(ctx)
	if err != nil {
		return err
	}
	s.conn = c
	s.pgx = isPgx(c)
	s.hi = tokenHigh{} // another server session, maybe another server
	s.stmts = new(stmtcache.Cache)
	s.everHeld = false
	s.gen++
	gen := s.gen
	s.mu.Lock()
	s.doomed = ""
	s.live = gen
	s.mu.Unlock()
	// Told within microseconds when the server closes the session (a kill,
	// a crash), where the checker below needs up to two intervals.
	s.watch = sessionwatch.Conn(c, func() { s.closedByServer(gen) })
	s.armed = true // a new watch looks at everything
	s.stop = make(chan struct{})
	s.l.wg.Add(1)
	go s.check(s.stop, s.gen)
	return nil
}

// closedByServer ends the locks of generation gen's connection, which the
// server closed; the connection itself is discarded by the next statement
// or check. s.mu is held throughout, so that a late call cannot end the
// locks of a connection pinned after it (pin sets live under s.mu).
func (s *session) closedByServer(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live != gen || s.doomed != "" {
		return
	}
	s.doomed = "the server closed the session"
	s.l.loseSession(s, s.doomed)
}

// unwatch stops the watch of the pinned connection, before it is closed
// or returned to the pool. sem held.
func (s *session) unwatch() {
	s.watch.Stop()
	s.watch = nil
	s.mu.Lock()
	s.live = 0
	s.mu.Unlock()
}

// unpin returns a connection that holds no lock to the pool. sem held.
func (s *session) unpin() {
	s.unwatch()
	close(s.stop)
	_ = s.stmts.Close()
	_ = s.conn.Close()
	s.conn, s.stmts = nil, nil
}

// queryRow runs query on the session's connection and scans its one row,
// through a statement prepared once per pinned connection where the store
// asks for it. The statement reads its own answer: the socket watch need
// not look at it, and looks again (rearm) only once the session holds a
// lock. sem held.
func (s *session) queryRow(ctx context.Context, query string, args []any, dest any) error {
	if s.armed {
		s.watch.Busy()
		s.armed = false
	}
	if s.l.prepare {
		return s.stmts.QueryRow(ctx, s.conn, query, args, dest)
	}
	if s.pgx {
		// Straight to pgx: database/sql's Rows and its argument
		// conversion cost each statement a few microseconds.
		return s.conn.Raw(func(dc any) error {
			return dc.(interface{ Conn() *pgx.Conn }).Conn().QueryRow(ctx, query, args...).Scan(dest)
		})
	}
	return s.conn.QueryRowContext(ctx, query, args...).Scan(dest)
}

// rearm has the watch look at what arrives on the idle socket again once
// the session holds a lock: the FATAL error a terminated session is sent
// before the server frees its locks. A session holding none needs only
// the close seen, so an acquire and its release cost one change of the
// watch each, not two. sem held.
func (s *session) rearm() {
	if s.held > 0 && !s.armed && s.watch != nil {
		s.watch.Idle()
		s.armed = true
	}
}

// high is the pinned connection's, for pgToken. sem held.
func (s *session) high() *tokenHigh { return &s.hi }

// fail discards the connection, which ends the server session and every
// lock on it, and ends the leases it held with sqllock.ErrLockLost. The
// connection is closed, never returned to the pool: a pooled session still
// holding locks would strand them. sem held.
func (s *session) fail(cause error) {
	if s.conn == nil {
		return
	}
	s.discard()
	s.l.cfg.logger.Warn("advisory: session failed, its locks are lost", telemetry.LogError, cause.Error())
	s.l.loseSession(s, fmt.Sprintf("the session holding it failed: %v", cause))
}

// discard closes the connection, never returning it to the pool, without
// reporting a loss: fail reports it, and a wait session discards a
// connection that holds no lease's lock. sem held.
func (s *session) discard() {
	if s.conn == nil {
		return
	}
	s.unwatch()
	close(s.stop)
	_ = s.stmts.Close()
	_ = s.conn.Raw(func(any) error { return driver.ErrBadConn }) // ErrBadConn makes database/sql close it
	s.conn, s.stmts = nil, nil
	s.held = 0
	s.backend.Store(0)
}

// doomedCause is why the pinned connection's locks were declared lost, or
// empty.
func (s *session) doomedCause() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doomed
}

// check pings the connection of generation gen every check interval while
// it is pinned: one cheap round trip per session, however many locks it
// holds. A failed ping fails the session.
func (s *session) check(stop <-chan struct{}, gen uint64) {
	defer s.l.wg.Done()
	t := time.NewTicker(s.l.cfg.check)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		stuck := s.doomed == "" && !s.busySince.IsZero() && time.Since(s.busySince) > stmtTimeout
		if stuck {
			s.doomed = fmt.Sprintf("a statement ran longer than %v", stmtTimeout)
		}
		s.mu.Unlock()
		if stuck {
			// The statement cannot be interrupted from here; its locks are
			// declared lost now, and run closes the connection when the
			// statement returns.
			s.l.loseSession(s, fmt.Sprintf("a statement ran longer than %v", stmtTimeout))
			continue
		}
		select {
		case <-stop:
			return
		case s.sem <- struct{}{}:
		default:
			continue // in use: a statement is running, and watched above
		}
		if s.gen != gen || s.conn == nil {
			s.unlock()
			return
		}
		s.mu.Lock()
		doomed := s.doomed
		s.mu.Unlock()
		if doomed != "" {
			s.fail(errors.New(doomed))
			s.unlock()
			return
		}
		if s.held == 0 {
			// Nothing to protect. Linger one interval after the last use,
			// so a lock taken and released in a loop keeps its session.
			if time.Since(s.lastUse) >= s.l.cfg.check {
				s.unpin()
				s.unlock()
				return
			}
			s.unlock()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.l.cfg.pingTimeout())
		err := s.conn.PingContext(ctx)
		cancel()
		if err != nil {
			s.fail(fmt.Errorf("session check: %w", err))
			s.unlock()
			return
		}
		s.unlock()
	}
}

// isPgx reports whether c is a connection of pgx's stdlib.
func isPgx(c *sql.Conn) bool {
	ok := false
	_ = c.Raw(func(dc any) error {
		_, ok = dc.(interface{ Conn() *pgx.Conn })
		return nil
	})
	return ok
}
