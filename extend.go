package sqllock

import (
	"context"
	"fmt"
	"time"
)

// Extender is a Lease whose key is held until an expiry on the database
// clock (tablelock, jobguard, semaphore permits, leaderships, rwlock
// holds), and which can push that expiry further by hand. Leases without
// an expiry do not implement it: rowlock's (its transaction holds the
// key), advisory's (the server holds the lock while its session lives),
// optimistic's (a version stamp); nor does a MultiLease, whose keys
// extend one by one. [Extend] says which with ErrUnsupported.
type Extender interface {
	Lease
	// Extend moves the lease's expiry to at least d from now on the
	// database clock; it never shortens it. It returns an error matching
	// ErrLockLost when the lease is no longer its holder's (expired, taken
	// over, force-released; the lease then ends as lost), ErrReleased
	// after Release, and ErrInvalidOption, changing nothing, for d <= 0.
	Extend(ctx context.Context, d time.Duration) error
}

// Extend extends l by d when it is an [Extender]. Otherwise it returns an
// error matching ErrUnsupported that names the key and says why, changing
// nothing: the lease has no expiry to move (check Err to learn whether it
// is still held), or, for a [MultiLease], each key's lease is extended on
// its own.
func Extend(ctx context.Context, l Lease, d time.Duration) error {
	if e, ok := l.(Extender); ok {
		return e.Extend(ctx, d)
	}
	return fmt.Errorf("extend %q: %w: %s", l.Key(), ErrUnsupported, noExpiry(l))
}

// checker is a lease held nowhere, found stale when it asks (optimistic).
type checker interface {
	Check(ctx context.Context) error
}

// noExpiry says why l, no Extender, cannot be extended. The root imports
// no strategy, so it goes by the methods a lease has.
func noExpiry(l Lease) string {
	switch l.(type) {
	case *MultiLease:
		return "a MultiLease has no expiry of its own: extend each key's lease, Part(key)"
	case rollbacker:
		return fmt.Sprintf("%T has no expiry: its transaction holds the key until it commits or rolls back", l)
	case checker:
		return fmt.Sprintf("%T has no expiry: it is a version stamp, good until another Acquire stamps the key", l)
	}
	return fmt.Sprintf("%T has no expiry: it is held until released or lost, as an advisory lock is while the server session holding it lives", l)
}
