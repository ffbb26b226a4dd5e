package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/leasestate"
)

var _ sqllock.Lease = (*Lease)(nil)

// Lease is a held advisory lock. Reentrant acquisitions by one owner, and
// shared acquisitions by any owners of one Locker, share one server-side
// lock and its token; the lock is released with the last of them.
type Lease struct {
	l     *Locker
	e     *entry
	key   string
	owner string
	token int64
	st    leasestate.State
}

// Key returns the key held.
func (s *Lease) Key() string { return s.key }

// Token returns the fencing token, drawn from sqllock_fence_seq by the
// statement that took the lock, so it is strictly larger for each new
// holder of the key.
func (s *Lease) Token() int64 { return s.token }

// Owner returns the owner the lease was acquired for.
func (s *Lease) Owner() string { return s.owner }

// Shared reports whether the lease is a shared (read) hold.
func (s *Lease) Shared() bool { return s.e.mode == shared }

// Done is closed when the lease is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.st.Done() }

// Err is nil while the lease is held, matches sqllock.ErrLockLost after its
// session failed and sqllock.ErrReleased after Release.
func (s *Lease) Err() error { return s.st.Err() }

// Release gives the hold back; the server lock goes with the last hold that
// shares it. The first call after a loss returns an error matching
// sqllock.ErrLockLost, any second call sqllock.ErrReleased. It does not heed
// ctx's cancellation (an unlock must not be abandoned halfway), so it is
// safe to defer with a context that has ended; the statement has its own
// timeout.
func (s *Lease) Release(ctx context.Context) error {
	if !s.st.MarkReleased() {
		return fmt.Errorf("advisory: release %q: %w", s.key, sqllock.ErrReleased)
	}

	l, e := s.l, s.e
	l.mu.Lock()
	if e.lostErr != nil {
		err := e.lostErr
		l.mu.Unlock()
		return fmt.Errorf("advisory: release %q: %w", s.key, err)
	}
	delete(e.leases, s)
	if len(e.leases) > 0 {
		l.mu.Unlock()
		s.st.End(sqllock.ErrReleased)
		return nil
	}
	e.state = stReleasing
	l.mu.Unlock()

	var notHeld bool
	err := e.sess.run(context.WithoutCancel(ctx), false, func(sctx context.Context, c *sql.Conn) error {
		l.mu.Lock()
		lost := e.lostErr != nil
		l.mu.Unlock()
		if lost {
			return nil
		}
		ok, err := l.unlock(sctx, e)
		if err != nil {
			return err
		}
		e.sess.held--
		notHeld = !ok
		l.mu.Lock()
		l.remove(e)
		l.mu.Unlock()
		return nil
	})
	wakeups.Signal(e.id.wake)
	defer s.st.End(sqllock.ErrReleased)

	l.mu.Lock()
	lostErr := e.lostErr
	l.mu.Unlock()
	switch {
	case err != nil && !errors.Is(err, errNoSession):
		// run failed the session: closing it freed the key in the server,
		// but whether it was still ours until now cannot be told.
		return fmt.Errorf("advisory: release %q: %w: the session failed (%v); closing it freed the key", s.key, sqllock.ErrLockLost, err)
	case lostErr != nil:
		return fmt.Errorf("advisory: release %q: %w", s.key, lostErr)
	case err != nil:
		return fmt.Errorf("advisory: release %q: %w: its session is gone", s.key, sqllock.ErrLockLost)
	case notHeld:
		return fmt.Errorf("advisory: release %q: %w: the server did not hold it for this session", s.key, sqllock.ErrLockLost)
	}
	return nil
}
