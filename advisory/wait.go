package advisory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// A blocked Acquire waits in the server when it can: on a wait session of
// its own it asks for the key's lock and blocks, and the server grants it
// the moment the holder lets go, in the order the sessions asked. A
// poller learns of a release in another process only at its next try
// (cap 50 ms) and sends about 20 statements a second meanwhile; a session
// waiting in the server sends none and is handed the key within a round
// trip, as a raw pg_advisory_lock or GET_LOCK caller is. The lease then
// lives on that session: a lock cannot move between sessions.

// waitInServer tries e's lock once on its shared session and, refused,
// waits for it on a wait session. polls is true when the caller must poll
// instead: no wait session was free, or one failed in a way worth a retry.
func (l *Locker) waitInServer(ctx context.Context, e *entry) (won *Lease, polls bool, err error) {
	l.mu.Lock()
	var ws *session
	if l.wasRefused(e.key) {
		// Contended a moment ago: ask on a wait session at once, which
		// is granted at once if the key is free, and save the try.
		ws = l.takeWaiter(e)
	}
	l.mu.Unlock()
	if ws == nil {
		won, err = l.tryOnce(ctx, e)
		switch {
		case won != nil:
			return won, false, nil
		case err != nil && dberr.IsRetryable(err):
			return nil, true, nil
		case err != nil:
			return nil, false, err
		}
		l.mu.Lock()
		l.refusedAt(e.key)
		ws = l.takeWaiter(e)
		l.mu.Unlock()
		if ws == nil {
			return nil, true, nil
		}
	}
	caller := ctx
	err = ws.block(ctx, func(ctx context.Context) (int64, bool, error) {
		return l.st.block(ctx, ws, e.id, e.mode)
	}, func(tok int64) {
		l.mu.Lock()
		e.sess, e.state, e.token = ws, stHeld, tok
		won = l.addLease(caller, e, e.owner)
		e.signal()
		l.mu.Unlock()
	})
	if err == nil {
		return won, false, nil
	}
	l.mu.Lock()
	l.freeWaiter(e)
	l.mu.Unlock()
	if dberr.IsRetryable(err) {
		l.cfg.logger.Info("advisory: wait in the server failed, polling", telemetry.AttrKey, e.key, telemetry.LogError, err.Error())
		return nil, true, nil
	}
	return nil, false, err
}

// hotFor is how long a key refused to a blocked Acquire counts as
// contended, and hotKeys how many such keys a Locker remembers.
const (
	hotFor  = time.Second
	hotKeys = 256
)

// wasRefused reports whether key was refused to a blocked Acquire of the
// Locker within hotFor. Locker.mu held.
func (l *Locker) wasRefused(key string) bool {
	at, ok := l.refused[key]
	return ok && time.Since(at) < hotFor
}

// refusedAt notes that key was refused now. Locker.mu held.
func (l *Locker) refusedAt(key string) {
	if len(l.refused) >= hotKeys {
		for k, at := range l.refused {
			if time.Since(at) >= hotFor {
				delete(l.refused, k)
			}
		}
		if len(l.refused) >= hotKeys {
			clear(l.refused)
		}
	}
	l.refused[key] = time.Now()
}

// takeWaiter assigns a free wait session to e, or returns nil when none is
// free or the pool's cap leaves no room for another. Locker.mu held.
func (l *Locker) takeWaiter(e *entry) *session {
	room := len(l.waiters)
	if n := l.db.Stats().MaxOpenConnections; n > 0 {
		// Keep a connection for the pinned sessions and one for the
		// statement that interrupts a wait.
		room = min(room, n-len(l.sessions)-1)
	}
	used := 0
	var free *session
	for _, s := range l.waiters {
		switch {
		case s.assigned:
			used++
		case free == nil:
			free = s
		}
	}
	if free == nil || used >= room {
		return nil
	}
	free.assigned = true
	e.ws = free
	return free
}

// freeWaiter gives e's wait session back for other keys. Locker.mu held.
func (l *Locker) freeWaiter(e *entry) {
	if e.ws != nil {
		e.ws.assigned = false
		e.ws = nil
	}
}

// block runs stmt, a lock request that waits in the server, on the
// session until it is granted (then granted runs, under the session lock)
// or ctx ends or the Locker closes. A request that ran out (ok false) is
// sent again. An ended wait is interrupted on the server from another
// session, and this session's connection discarded, so that a grant that
// raced the interruption leaves no lock behind.
func (s *session) block(ctx context.Context, stmt func(ctx context.Context) (int64, bool, error), granted func(tok int64)) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	// Close marks the Locker closed before it takes the session locks.
	if s.l.isClosed() {
		return errClosed
	}
	if s.held != 0 {
		// A wait session serves one entry at a time and is given back
		// only once that entry's lock is freed. An ended wait discards
		// its session, which would end whatever else it held.
		return fmt.Errorf("advisory: a wait session holds %d locks", s.held)
	}
	if s.doomedCause() != "" {
		s.discard() // holds no lease's lock: nothing to report
	}
	if s.conn == nil {
		if err := s.pin(ctx); err != nil {
			return err
		}
		var id int64
		if err := s.queryRow(ctx, s.l.st.backendID(), nil, &id); err != nil {
			s.discard()
			return err
		}
		s.backend.Store(id)
	}
	for {
		if err := ctxend.Err(ctx); err != nil {
			return err
		}
		// Not ctx: a driver ends a cancelled statement by closing the
		// socket, which a session waiting for a lock does not notice, and
		// a cancellable context costs every statement a goroutine handoff
		// in database/sql and the drivers. The statement runs on this
		// goroutine (a goroutine per wait cost the hot key a tenth of its
		// CPU), and the guard interrupts it on the server instead.
		g := s.guard(ctx)
		if beforeWait != nil {
			beforeWait()
		}
		tok, ok, err := stmt(context.Background())
		if !g.stop() {
			s.discard()
			if cerr := ctxend.Err(ctx); cerr != nil {
				return cerr
			}
			return errClosed
		}
		if err != nil {
			s.discard()
			return err
		}
		if !ok {
			continue
		}
		if doomed := s.doomedCause(); doomed != "" {
			s.discard() // frees the lock just granted
			return errors.New(doomed)
		}
		s.held++
		s.everHeld = true
		s.lastUse = time.Now()
		s.rearm()
		granted(tok)
		return nil
	}
}

// waitGuard interrupts a session's waiting statement on the server when
// the wait's context ends or the Locker closes.
type waitGuard struct {
	s        *session
	once     sync.Once
	returned chan struct{} // closed by stop: the statement has returned
	over     chan struct{} // closed when the interrupting is over
	stops    [2]func() bool
}

// beforeWait, set by tests only, runs between arming a wait's guard and
// sending its statement.
var beforeWait func()

// interruptAgain is how often a guard repeats its interrupt while the
// statement has not returned: a cancel that reaches the session before
// the statement does is ignored by the server.
const interruptAgain = 100 * time.Millisecond

// guard arms a waitGuard for the statement about to run on s. sem held.
func (s *session) guard(ctx context.Context) *waitGuard {
	g := &waitGuard{s: s, returned: make(chan struct{}), over: make(chan struct{})}
	g.stops[0] = context.AfterFunc(ctx, g.fire)
	g.stops[1] = context.AfterFunc(s.l.closing, g.fire)
	return g
}

func (g *waitGuard) fire() {
	g.once.Do(func() {
		defer close(g.over)
		for {
			g.s.interrupt()
			select {
			case <-g.returned:
				return
			case <-time.After(interruptAgain):
			}
		}
	})
}

// stop disarms the guard once the statement has returned. It reports
// whether the wait went uninterrupted; if not, it returns when the
// interrupting is over, and the session must be discarded (a grant that
// raced the interrupt is freed with it).
func (g *waitGuard) stop() bool {
	close(g.returned)
	a, b := g.stops[0](), g.stops[1]()
	if a && b {
		return true
	}
	<-g.over
	return false
}

// interruptLost, set by tests only, reports whether to drop an
// interrupt, as one that missed its statement.
var interruptLost func() bool

// interrupt ends the waiting statement from another session. Failing
// that, the statement ends when its lock is granted (discarded then, which
// frees it), its GET_LOCK timeout passes (blockFor), or its connection
// fails. sem held.
func (s *session) interrupt() {
	if interruptLost != nil && interruptLost() {
		return
	}
	for range 3 {
		ctx, done := context.WithTimeout(context.Background(), lease.ReleaseTimeout)
		_, err := s.l.db.ExecContext(ctx, s.l.st.interrupt(s.backend.Load()))
		done()
		if err == nil {
			return
		}
		s.l.cfg.logger.Warn("advisory: could not interrupt a wait in the server", telemetry.LogError, err.Error())
	}
}
