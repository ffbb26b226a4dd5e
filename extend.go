package sqllock

import (
	"context"
	"fmt"
	"time"
)

// Extender is a Lease whose key is held until an expiry on the database
// clock (tablelock, jobguard), and which can push that expiry further by
// hand. Leases that the server holds for as long as their session or
// transaction lives (rowlock, advisory) have no expiry and do not
// implement it; [Extend] says so with ErrUnsupported.
type Extender interface {
	Lease
	// Extend moves the lease's expiry to at least d from now on the
	// database clock; it never shortens it. It returns an error matching
	// ErrLockLost when the lease is no longer its holder's (expired, taken
	// over, force-released; the lease then ends as lost), ErrReleased
	// after Release, and ErrInvalidOption, changing nothing, for d <= 0.
	Extend(ctx context.Context, d time.Duration) error
}

// Extend extends l by d when it is an [Extender]. For a lease without an
// expiry it returns an error matching ErrUnsupported, changing nothing:
// such a lease lasts as long as its session or transaction, and there is
// nothing to extend (check Err to learn whether it is still held).
func Extend(ctx context.Context, l Lease, d time.Duration) error {
	if e, ok := l.(Extender); ok {
		return e.Extend(ctx, d)
	}
	return fmt.Errorf("extend %q: %w: the lease has no expiry (the server holds it while its session or transaction lives)", l.Key(), ErrUnsupported)
}
