package tablelock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/leasestate"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

var _ sqllock.Lease = (*Lease)(nil)

type holdID struct{ key, owner string }

// hold is one row held by this Locker: the leases that share it (reentrant
// acquisitions by one owner) and the goroutine that renews it. The goroutine
// lives as long as the hold, not as long as any Acquire's context.
type hold struct {
	l     *Locker
	id    holdID
	token int64

	mu       sync.Mutex
	deadline time.Time // the lease counts as lost from here on
	leases   map[*Lease]struct{}
	lostErr  error
	stop     chan struct{} // closed to end the renewal goroutine
	stopped  bool
}

// Lease is a held row of the lock table.
type Lease struct {
	h     *hold
	key   string
	owner string
	token int64

	st leasestate.State
}

// Key returns the key held.
func (s *Lease) Key() string { return s.key }

// Token returns the fencing token, strictly larger for each new holder of
// the key. Reentrant acquisitions by one owner share one token.
func (s *Lease) Token() int64 { return s.token }

// Owner returns the owner recorded in the row.
func (s *Lease) Owner() string { return s.owner }

// Done is closed when the lease is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.st.Done() }

// Err is nil while the lease is held. After a loss it matches
// sqllock.ErrLockLost, after Release sqllock.ErrReleased. It checks the
// renewal deadline itself, so a holder resumed after a long pause learns of
// the loss even before the renewal goroutine runs.
func (s *Lease) Err() error {
	s.h.checkDeadline()
	return s.st.Err()
}

// Release gives one hold of the key back. The first call after a loss
// returns an error matching sqllock.ErrLockLost (and still frees the row if
// the database has not handed it on), any second call sqllock.ErrReleased.
// It runs detached from ctx's cancellation, bounded by its own timeout, so
// it is safe to defer with a context that has ended.
func (s *Lease) Release(ctx context.Context) error {
	if !s.st.MarkReleased() {
		return fmt.Errorf("tablelock: release %q: %w", s.key, sqllock.ErrReleased)
	}

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	lostErr := s.h.detach(s)
	relErr := s.h.l.releaseRow(ctx, s.key, s.owner, s.token)
	l := s.h.l
	l.waiters.Signal(s.key)
	l.closeStmtsIfIdle()
	switch {
	case lostErr != nil:
		s.st.End(sqllock.ErrReleased)
		return lostErr
	case errors.Is(relErr, sqllock.ErrLockLost):
		err := fmt.Errorf("tablelock: release %q: %w: the row is no longer ours", s.key, sqllock.ErrLockLost)
		s.st.End(sqllock.ErrReleased)
		return err
	case relErr != nil:
		s.st.End(sqllock.ErrReleased)
		return fmt.Errorf("tablelock: release %q: %w (the row expires by itself)", s.key, relErr)
	}
	s.st.End(sqllock.ErrReleased)
	return nil
}

// releaseRow runs the release statement, retrying transient errors within
// ctx. It returns ErrLockLost when the row is no longer this holder's.
func (l *Locker) releaseRow(ctx context.Context, key, owner string, token int64) error {
	backoff := 5 * time.Millisecond
	for {
		n, err := l.execRelease(ctx, key, owner, token)
		if err == nil {
			if n == 0 {
				return sqllock.ErrLockLost
			}
			return nil
		}
		if !sqlutil.IsRetryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, 200*time.Millisecond)
		case <-ctx.Done():
			return err
		}
	}
}

func (l *Locker) execRelease(ctx context.Context, key, owner string, token int64) (int64, error) {
	st, put, err := l.stmts.Stmt(ctx, l.db, l.q.release)
	if err != nil {
		return 0, err
	}
	defer put()
	if l.dialect == sqllock.Postgres {
		return countRows(st.QueryContext(ctx, key, owner, token, l.q.channel))
	}
	res, err := st.ExecContext(ctx, key, owner, token)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// newLease records a won attempt. start is when the acquire statement was
// sent: the database set the expiry from a clock reading no earlier than
// that, so start+TTL-margin is before the row could be taken by another.
func (l *Locker) newLease(key, owner string, a attempt, start time.Time) *Lease {
	s := &Lease{key: key, owner: owner, token: a.token}
	deadline := start.Add(l.cfg.ttl - l.cfg.margin)
	id := holdID{key, owner}

	l.mu.Lock()
	h := l.holds[id]
	if h != nil {
		h.mu.Lock()
		if h.token == a.token && h.lostErr == nil && !h.stopped {
			h.leases[s] = struct{}{}
			if deadline.After(h.deadline) {
				h.deadline = deadline
			}
			h.mu.Unlock()
			l.mu.Unlock()
			s.h = h
			return s
		}
		h.mu.Unlock()
		// A different token means the old hold expired and this owner took
		// the key afresh; the old leases are lost.
		defer h.lose(errors.New("the key was taken again with a new token"))
	}
	h = &hold{
		l: l, id: id, token: a.token, deadline: deadline,
		leases: map[*Lease]struct{}{s: {}},
		stop:   make(chan struct{}),
	}
	l.holds[id] = h
	l.mu.Unlock()
	s.h = h
	go h.renewLoop()
	return s
}

// detach removes a released lease from its hold. It returns the loss error
// if the hold was lost, and stops renewal when no lease is left.
func (h *hold) detach(s *Lease) error {
	h.checkDeadline()
	h.mu.Lock()
	delete(h.leases, s)
	if h.lostErr != nil {
		err := h.lostErr
		h.mu.Unlock()
		return fmt.Errorf("tablelock: release %q: %w", h.id.key, err)
	}
	last := len(h.leases) == 0
	if last {
		h.halt()
	}
	h.mu.Unlock()
	if last {
		h.forget()
	}
	return nil
}

// halt ends renewal. h.mu must be held.
func (h *hold) halt() {
	if !h.stopped {
		h.stopped = true
		close(h.stop)
	}
}

// forget drops the hold from its Locker. h.mu must not be held: the Locker's
// mutex is taken before a hold's, never after.
func (h *hold) forget() {
	h.l.mu.Lock()
	if h.l.holds[h.id] == h {
		delete(h.l.holds, h.id)
	}
	h.l.mu.Unlock()
}

// checkDeadline declares the loss if the renewal deadline has passed,
// whether or not the renewal goroutine has run since.
func (h *hold) checkDeadline() {
	h.mu.Lock()
	past := !h.stopped && time.Now().After(h.deadline)
	h.mu.Unlock()
	if past {
		h.lose(errors.New("not renewed before the safety margin"))
	}
}

// lose ends every lease of the hold with ErrLockLost.
func (h *hold) lose(cause error) {
	h.mu.Lock()
	if h.lostErr != nil || h.stopped {
		h.mu.Unlock()
		return
	}
	h.lostErr = fmt.Errorf("%w: %v", sqllock.ErrLockLost, cause)
	err := fmt.Errorf("tablelock: lease %q (token %d): %w", h.id.key, h.token, h.lostErr)
	leases := make([]*Lease, 0, len(h.leases))
	for s := range h.leases {
		leases = append(leases, s)
	}
	h.halt()
	h.mu.Unlock()
	h.forget()
	h.l.closeStmtsIfIdle()
	h.l.cfg.logger.Warn("tablelock: lease lost", "key", h.id.key, "token", h.token, "cause", cause.Error())
	for _, s := range leases {
		s.st.End(err)
	}
}

// renewLoop extends the row every renew interval. Transient errors are
// retried until the deadline; only a row that is no longer ours, a
// permanent error, or a spent deadline ends the lease.
func (h *hold) renewLoop() {
	l := h.l
	next := time.NewTimer(l.cfg.renew)
	defer next.Stop()
	retry := l.cfg.renew / 8
	for {
		h.mu.Lock()
		left := time.Until(h.deadline)
		h.mu.Unlock()
		expiry := time.NewTimer(left)
		select {
		case <-h.stop:
			expiry.Stop()
			return
		case <-expiry.C:
			h.lose(errors.New("not renewed before the safety margin"))
			return
		case <-next.C:
		}
		expiry.Stop()

		start := time.Now()
		h.mu.Lock()
		dl := h.deadline
		h.mu.Unlock()
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		ok, err := l.renewRow(ctx, h.id.key, h.id.owner, h.token)
		cancel()
		switch {
		case err == nil && ok:
			h.mu.Lock()
			if d := start.Add(l.cfg.ttl - l.cfg.margin); d.After(h.deadline) {
				h.deadline = d
			}
			h.mu.Unlock()
			next.Reset(l.cfg.renew)
		case err == nil:
			h.lose(errors.New("the row is no longer ours (expired, taken or deleted)"))
			return
		case sqlutil.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded):
			l.cfg.logger.Info("tablelock: renewal failed, retrying", "key", h.id.key, "error", err.Error())
			next.Reset(retry)
		default:
			h.lose(fmt.Errorf("renewal failed: %w", err))
			return
		}
	}
}

func (l *Locker) renewRow(ctx context.Context, key, owner string, token int64) (bool, error) {
	st, put, err := l.stmts.Stmt(ctx, l.db, l.q.renew)
	if err != nil {
		return false, err
	}
	defer put()
	ttl := l.cfg.ttl.Microseconds()
	var args []any
	if l.dialect == sqllock.MySQL {
		args = []any{ttl, key, owner, token}
	} else {
		args = []any{key, owner, token, ttl}
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
