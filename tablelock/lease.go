package tablelock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/tablecore"
)

var _ sqllock.Extender = (*Lease)(nil)

// Lease is a held row of the lock table.
type Lease struct {
	s *tablecore.Lease // the lease itself; this type documents it
}

// Key returns the key held.
func (s *Lease) Key() string { return s.s.Key() }

// Token returns the fencing token, strictly larger for each new holder of
// the key. Reentrant acquisitions by one owner share one token.
func (s *Lease) Token() int64 { return s.s.Token() }

// SpanContext returns the lease's span: sqllock.Do runs its work under it.
// It is invalid when tracing is off.
func (s *Lease) SpanContext() trace.SpanContext { return s.s.SpanContext() }

// Owner returns the owner recorded in the row.
func (s *Lease) Owner() string { return s.s.Owner() }

// Done is closed when the lease is released or lost.
func (s *Lease) Done() <-chan struct{} { return s.s.Done() }

// Err is nil while the lease is held. After a loss it matches
// sqllock.ErrLockLost, after Release sqllock.ErrReleased. It checks the
// renewal deadline itself, so a holder resumed after a long pause learns of
// the loss even before the renewal goroutine runs.
func (s *Lease) Err() error { return s.s.Err() }

// Release gives one hold of the key back. The first call after a loss
// returns an error matching sqllock.ErrLockLost (and still frees the row if
// the database has not handed it on), any second call sqllock.ErrReleased.
// It runs detached from ctx's cancellation, bounded by its own timeout, so
// it is safe to defer with a context that has ended.
func (s *Lease) Release(ctx context.Context) error { return s.s.Release(ctx) }

// Extend moves the row's expiry to at least d from now on the database
// clock, for a holder about to do something longer than the TTL without
// a chance to renew (a long blocking call, a pause it expects). It never
// shortens the expiry. Automatic renewal goes on every renew interval and
// never shortens it either, so after the extension has run out the lease
// is back on its TTL; Release frees the key at once whatever the
// extension. If the holder dies, the key stays taken until the extended
// expiry (ForceRelease frees it sooner). The holder's loss deadline moves
// with the expiry, a safety margin before it. Reentrant leases share one
// row: extending one extends them all.
//
// It returns an error matching sqllock.ErrLockLost when the row is no
// longer this holder's (the lease then ends as lost), the loss itself
// after an earlier loss, sqllock.ErrReleased after Release, and
// sqllock.ErrInvalidOption, changing nothing, when d <= 0. A transient
// failure is returned as is: the lease stays held and renewal goes on.
func (s *Lease) Extend(ctx context.Context, d time.Duration) error { return s.s.Extend(ctx, d) }
