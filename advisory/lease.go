package advisory

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/lease"
)

var _ sqllock.Lease = (*Lease)(nil)

// Lease is a held advisory lock. Reentrant acquisitions by one owner, and
// shared acquisitions by any owners of one Locker, share one server-side
// lock and its token; the lock is released with the last of them.
type Lease struct {
	base  lease.Base
	l     *Locker
	e     *entry
	owner string
}

// Key returns the key held.
func (s *Lease) Key() string { return s.base.Key() }

// Token returns the fencing token, drawn by the statement that took the
// lock (on PostgreSQL from sqllock_token_seq under the token era, or from
// sqllock_fence_seq under the timeline; on MariaDB from
// sqllock_fence_seq), so it is strictly larger for each new holder of
// the key.
func (s *Lease) Token() int64 { return s.base.Token() }

// SpanContext returns the lease's span: sqllock.Do runs its work under it.
// It is invalid when tracing is off.
func (s *Lease) SpanContext() trace.SpanContext { return s.base.SpanContext() }

// Owner returns the owner the lease was acquired for.
func (s *Lease) Owner() string { return s.owner }

// Shared reports whether the lease is a shared (read) hold.
func (s *Lease) Shared() bool { return s.e.mode == shared }

// Done is closed when the lease is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.base.Done() }

// Err is nil while the lease is held, matches sqllock.ErrLockLost after its
// session failed or its Locker was closed, and sqllock.ErrReleased after
// Release.
func (s *Lease) Err() error { return s.base.Err() }

// Release gives the hold back; the server lock goes with the last hold that
// shares it. The first call after a loss returns an error matching
// sqllock.ErrLockLost, any second call sqllock.ErrReleased. It does not heed
// ctx's cancellation (an unlock must not be abandoned halfway), so it is
// safe to defer with a context that has ended.
func (s *Lease) Release(ctx context.Context) error {
	// Not bounded by the kernel's release timeout: giving up the wait for
	// the session's turn would leave the key held on the session with no
	// lease left to free it. Statements on a session run detached anyway,
	// and the checker bounds how long one holds the turn (stmtTimeout).
	return s.base.ReleaseIn(context.WithoutCancel(ctx), "release", s.free)
}

// free is Release's own work: drop the hold, and unlock with the last one.
func (s *Lease) free(ctx context.Context, lost error) error {
	if lost != nil {
		return nil // the loss removed the entry: nothing is left to free
	}
	l, e := s.l, s.e
	l.mu.Lock()
	if e.lost != "" {
		cause := e.lost
		l.mu.Unlock()
		return s.base.Lost(cause)
	}
	delete(e.leases, s)
	if len(e.leases) > 0 {
		l.mu.Unlock()
		return nil
	}
	e.state = stReleasing
	l.mu.Unlock()

	var notHeld bool
	err := e.sess.run(ctx, false, func(ctx context.Context) error {
		l.mu.Lock()
		lost := e.lost != ""
		l.mu.Unlock()
		if lost {
			return nil
		}
		held, err := l.st.unlock(ctx, e.sess, e.id, e.mode)
		if err != nil {
			return err
		}
		e.sess.held--
		notHeld = !held
		l.mu.Lock()
		l.remove(e)
		l.mu.Unlock()
		return nil
	})
	wakeups.Signal(e.id.wake)

	l.mu.Lock()
	cause := e.lost
	l.mu.Unlock()
	switch {
	case err != nil && !errors.Is(err, errNoSession):
		// run failed the session: closing it freed the key in the server,
		// but whether it was still ours until now cannot be told.
		return s.base.Lost(fmt.Sprintf("the session failed (%v); closing it freed the key", err))
	case cause != "":
		return s.base.Lost(cause)
	case err != nil:
		return s.base.Lost("its session is gone")
	case notHeld:
		return s.base.Lost("the server did not hold it for this session")
	}
	return nil
}
