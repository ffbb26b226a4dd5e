package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/telemetry"
)

var _ sqllock.Lease = (*Lease)(nil)

// Lease is a row lock held by an open transaction. The transaction is the
// caller's to use (Tx): work done in it commits with Release, or is undone
// with Rollback, in the same step that frees the key.
type Lease struct {
	base   lease.Base
	l      *Locker
	keys   []string // ascending; one unless AcquireSet took several
	a      *attempt // the pinned connection and the transaction
	holder holder   // the holding session, for the monitor
}

func newLease(l *Locker, a *attempt, keys []string, g grant) *Lease {
	s := &Lease{l: l, a: a, keys: keys, holder: g.holder}
	if len(keys) == 1 {
		s.base.Init("rowlock", keys[0], g.token)
	} else {
		s.base.Init("rowlock", fmt.Sprintf("%q", keys), g.token)
	}
	return s
}

// Key returns the key held; for a set taken by AcquireSet, the keys as a
// quoted list, for messages (Keys returns them).
func (s *Lease) Key() string { return s.base.Key() }

// SpanContext returns the lease's span: sqllock.Do runs its work under it.
// It is invalid when tracing is off.
func (s *Lease) SpanContext() trace.SpanContext { return s.base.SpanContext() }

// Keys returns the keys held, in the order they were locked.
func (s *Lease) Keys() []string { return slices.Clone(s.keys) }

// Token returns the fencing token, strictly larger for each new holder of
// the key. It was drawn from the shared sequence inside the holding
// transaction, after the row lock was granted.
func (s *Lease) Token() int64 { return s.base.Token() }

// Tx returns the transaction that holds the row lock. Run the protected
// work in it; end it only with Release or Rollback, never with its own
// Commit or Rollback (which would free the key behind the lease's back: the
// lease then reports ErrLockLost).
func (s *Lease) Tx() *sql.Tx { return s.a.tx }

// Done is closed when the lease is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.base.Done() }

// Err is nil while the lease is held. After a loss (its session or
// transaction ended, or its Locker was closed) it matches
// sqllock.ErrLockLost, after Release or Rollback sqllock.ErrReleased.
func (s *Lease) Err() error { return s.base.Err() }

// lose ends a lease whose session or transaction is gone. The transaction
// is rolled back (it cannot commit any more) and its connection discarded.
// Called by the monitor only.
func (s *Lease) lose(cause string) {
	if !s.base.Lose(s.base.Lost(cause)) {
		return // released meanwhile, or ended by Close
	}
	s.l.cfg.logger.Warn("rowlock: lease lost", telemetry.AttrKey, s.base.Key(), telemetry.AttrToken, s.base.Token(), telemetry.AttrCause, telemetry.Cause(cause), telemetry.LogError, cause)
	l := s.l
	l.unwatch(s)
	// The rollback waits for any statement the holder still runs on the
	// dead session; do not hold up the monitor for it. The session watch
	// that may call this is not counted in bg: an Add once Close has begun
	// could race with its Wait, so a lease lost while Close runs is
	// closed here (Close left it alone: this loss came first). That is
	// brief on the watcher's goroutine, which fires only once the server
	// closed the session: the rollback fails at once; the monitor is
	// waited for by Close anyway.
	l.mu.Lock()
	closing := l.closed
	if !closing {
		l.bg.Add(1)
	}
	l.mu.Unlock()
	if closing {
		s.a.close(true)
		return
	}
	go func() {
		defer l.bg.Done()
		s.a.close(true)
	}()
}

// Release commits the lease's transaction, which frees the key and makes
// the work done in Tx durable in one step. The first call after a loss
// returns an error matching sqllock.ErrLockLost (the work was rolled back
// with the session, or by Close), any second call sqllock.ErrReleased. A
// commit the database refuses (a deferred constraint, a serialization
// failure) is returned as is: the transaction is rolled back and the key
// free.
//
// A commit takes no context in database/sql; ctx is accepted for the
// sqllock.Lease contract and is not needed to make Release safe to defer.
func (s *Lease) Release(ctx context.Context) error {
	return s.end(ctx, "release", (*sql.Tx).Commit)
}

// Rollback undoes the work done in the lease's transaction and frees the
// key. It reports losses and repeated calls as Release does.
func (s *Lease) Rollback(ctx context.Context) error {
	return s.end(ctx, "rollback", (*sql.Tx).Rollback)
}

// end runs the kernel's release protocol around finish, which ends the
// transaction. finish takes no context, so ctx is passed on unchanged.
func (s *Lease) end(ctx context.Context, op string, finish func(*sql.Tx) error) error {
	return s.base.ReleaseIn(ctx, op, func(_ context.Context, lost error) error {
		s.l.unwatch(s)
		if lost != nil {
			return nil // whoever recorded the loss ends the transaction
		}
		err := finish(s.a.tx)
		s.a.close(err != nil && dberr.IsConnLoss(err))
		switch {
		case err == nil:
			return nil
		case errors.Is(err, sql.ErrTxDone):
			return s.base.Lost("the transaction was ended outside the lease")
		case dberr.IsConnLoss(err):
			return s.base.Lost(fmt.Sprintf("the session died, its work was rolled back: %v", err))
		}
		return fmt.Errorf("rowlock: %s %q: %w", op, s.base.Key(), err)
	})
}

// TxFrom returns the transaction of the rowlock lease held by the
// sqllock.Do, DoLease or DoAll that made ctx, so the protected work can run
// inside the transaction that holds the keys.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	l, ok := sqllock.LeaseFrom(ctx)
	if !ok {
		return nil, false
	}
	if m, ok := l.(*sqllock.MultiLease); ok {
		// DoAll: a rowlock set is one Lease behind every key.
		l, ok = m.Shared()
		if !ok {
			return nil, false
		}
	}
	s, ok := l.(*Lease)
	if !ok {
		return nil, false
	}
	return s.a.tx, true
}
