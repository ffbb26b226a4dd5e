package sqllock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
)

// MaxKeys is the most distinct keys AcquireAll, TryAcquireAll and DoAll
// take in one call. Each key is one lock and one round trip (rowlock: one
// pinned connection), so a longer list is more likely a mistake than a plan.
const MaxKeys = 64

var (
	_ Lease     = (*MultiLease)(nil)
	_ composite = (*MultiLease)(nil)
)

// SetLocker is a Locker that can hold several keys as one lease.
// AcquireAll, TryAcquireAll and DoAll use it when their Locker has it, and
// every key of the MultiLease is then that one lease. rowlock has it: the
// keys' row locks are taken in one transaction, so the work done in it
// commits or rolls back with every key at once (rowlock.TxFrom finds it
// inside DoAll), and the set pins one connection.
type SetLocker interface {
	Locker
	// AcquireSet takes every key of keys, which are valid, distinct and in
	// ascending order, as one lease, blocking until all are held or ctx
	// ends.
	AcquireSet(ctx context.Context, keys []string) (Lease, error)
	// TryAcquireSet is AcquireSet without waiting: every key or none.
	TryAcquireSet(ctx context.Context, keys []string) (Lease, error)
}

// AcquireAll takes every key on l and returns one lease over all of them.
//
// The keys are deduplicated and taken one at a time in ascending byte
// order, blocking on each until it is held or ctx ends. Because every
// caller takes keys in the same global order, two callers that want
// overlapping sets queue for the first key they share instead of each
// holding what the other waits for: a set of AcquireAll callers cannot
// deadlock. That holds only among callers that take all their keys of l
// through AcquireAll (or in the same order): a caller that already holds a
// key acquired separately must not wait here for a key that sorts before it.
//
// On any failure AcquireAll releases what it took, in reverse order, and
// returns an error naming the key that failed and wrapping the strategy's
// error: it matches ErrNotAcquired, and ctx.Err() when ctx ended. An empty
// list, more than MaxKeys distinct keys or an invalid key (see ValidateKey)
// is refused with an error matching ErrInvalidKey before anything is taken.
func AcquireAll(ctx context.Context, l Locker, keys ...string) (*MultiLease, error) {
	return acquireAll(ctx, l, keys, true)
}

// TryAcquireAll is AcquireAll without waiting: it takes every key or none.
// When a key is held elsewhere it releases the keys it already took and
// returns an error matching ErrNotAcquired that names the key.
func TryAcquireAll(ctx context.Context, l Locker, keys ...string) (*MultiLease, error) {
	return acquireAll(ctx, l, keys, false)
}

// DoAll is Do over several keys: it takes them with AcquireAll, runs fn
// with a context that is cancelled the moment any of them is lost and that
// carries the MultiLease (LeaseFrom, TokenFrom), and releases them all.
func DoAll(ctx context.Context, l Locker, keys []string, fn func(ctx context.Context) error) error {
	if l == nil || fn == nil {
		return fmt.Errorf("sqllock: DoAll %q: %w: nil locker or function", keys, ErrInvalidOption)
	}
	lease, err := AcquireAll(ctx, l, keys...)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}

func acquireAll(ctx context.Context, l Locker, keys []string, wait bool) (*MultiLease, error) {
	op := "acquire all"
	if !wait {
		op = "try acquire all"
	}
	if l == nil {
		return nil, fmt.Errorf("sqllock: %s: %w: nil locker", op, ErrInvalidOption)
	}
	sorted, err := sortKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("sqllock: %s: %w", op, err)
	}
	if sl, ok := l.(SetLocker); ok {
		var set Lease
		if wait {
			set, err = sl.AcquireSet(ctx, sorted)
		} else {
			set, err = sl.TryAcquireSet(ctx, sorted)
		}
		if err != nil {
			return nil, fmt.Errorf("sqllock: %s: %w", op, err)
		}
		leases := make([]Lease, len(sorted))
		for i := range leases {
			leases[i] = set
		}
		return newMultiLease(sorted, leases, []Lease{set}), nil
	}
	leases := make([]Lease, 0, len(sorted))
	for _, key := range sorted {
		var lease Lease
		if wait {
			lease, err = l.Acquire(ctx, key)
		} else {
			lease, err = l.TryAcquire(ctx, key)
		}
		if err != nil {
			return nil, rollback(ctx, leases, fmt.Errorf("sqllock: %s: key %q: %w", op, key, err))
		}
		leases = append(leases, lease)
	}
	// A key taken early may have been lost while a later one was awaited.
	// Return only a set that was whole at one moment: that is what makes
	// the largest token a fencing token for every key (see Token).
	for _, lease := range leases {
		if err := lease.Err(); err != nil {
			return nil, rollback(ctx, leases, fmt.Errorf("sqllock: %s: key %q: %w: lost while later keys were taken: %w", op, lease.Key(), ErrNotAcquired, err))
		}
	}
	return newMultiLease(sorted, leases, leases), nil
}

// sortKeys validates keys and returns them sorted, without duplicates.
func sortKeys(keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidKey)
	}
	for _, key := range keys {
		if err := ValidateKey(key); err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) > MaxKeys {
		return nil, fmt.Errorf("%w: %d distinct keys, more than MaxKeys (%d)", ErrInvalidKey, len(sorted), MaxKeys)
	}
	return sorted, nil
}

// rollback releases leases in reverse order after a failed acquisition,
// even when the failure was ctx ending. Release failures are reported in
// the message only: the error's identity (errors.Is) stays the
// acquisition's.
func rollback(ctx context.Context, leases []Lease, err error) error {
	ctx = context.WithoutCancel(ctx)
	errs := []error{err}
	for i := len(leases) - 1; i >= 0; i-- {
		if relErr := leases[i].Release(ctx); relErr != nil {
			errs = append(errs, fmt.Errorf("releasing %q after the failure: %v", leases[i].Key(), relErr))
		}
	}
	return errors.Join(errs...)
}

// MultiLease holds several keys of one Locker as one lease, as AcquireAll
// returns it. Done closes when any key is lost (or at Release); Release
// gives every key back, in the reverse of the order they were taken.
//
// A lost key does not make MultiLease give back the others: the caller's
// work may still be running under them. They are released by Release,
// which the caller should defer as for any lease.
type MultiLease struct {
	keys   []string // sorted, distinct
	leases []Lease  // parallel to keys
	// parts are the distinct leases: leases itself, or the one lease of
	// a SetLocker behind every key.
	parts []Lease
	token int64

	stop        chan struct{} // closed by Release: ends the watcher
	watcherDone chan struct{}

	// ended is the end-once state: its Done closes once, and Cause keeps
	// the first error given to endWith. A context rather than the
	// strategies' lease kernel, which imports this package.
	ended    context.Context
	endWith  context.CancelCauseFunc
	released atomic.Bool // Release was called
}

func newMultiLease(keys []string, leases, parts []Lease) *MultiLease {
	m := &MultiLease{
		keys: keys, leases: leases, parts: parts,
		stop: make(chan struct{}), watcherDone: make(chan struct{}),
	}
	m.ended, m.endWith = context.WithCancelCause(context.Background())
	for _, l := range parts {
		m.token = max(m.token, l.Token())
	}
	go m.watch()
	return m
}

// watch waits for the first part to end, or for Release. One goroutine for
// any number of keys; it never outlives the lease.
func (m *MultiLease) watch() {
	defer close(m.watcherDone)
	cases := make([]reflect.SelectCase, 0, len(m.parts)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.stop)})
	for _, l := range m.parts {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.Done())})
	}
	i, _, _ := reflect.Select(cases)
	if i > 0 {
		m.endPart(m.parts[i-1])
	}
}

// endPart ends the MultiLease because part ended without its Release.
func (m *MultiLease) endPart(part Lease) {
	cause := part.Err()
	if cause == nil {
		cause = ErrLockLost
	}
	m.endWith(fmt.Errorf("sqllock: lease on %s: key %q: %w", m.Key(), part.Key(), cause))
}

// Key describes the keys held, quoted, in the order taken: for messages.
// Keys returns them as a slice.
func (m *MultiLease) Key() string { return fmt.Sprintf("%q", m.keys) }

// Keys returns the distinct keys held, in the order they were taken
// (ascending bytes).
func (m *MultiLease) Keys() []string { return slices.Clone(m.keys) }

// Part returns the lease on one of the keys, for its own token or a
// strategy's own methods. Release the MultiLease, not the part: a part
// released alone ends the MultiLease as a lost key does. With a SetLocker
// (rowlock) every key's part is the same lease: one transaction.
func (m *MultiLease) Part(key string) (Lease, bool) {
	i, ok := slices.BinarySearch(m.keys, key)
	if !ok {
		return nil, false
	}
	return m.leases[i], true
}

// Shared returns the one lease behind every key when a SetLocker took the
// set (rowlock: its Tx holds every key), and false when each key has a
// lease of its own.
func (m *MultiLease) Shared() (Lease, bool) {
	if len(m.parts) == 1 {
		return m.parts[0], true
	}
	return nil, false
}

// Token returns the largest of the keys' tokens.
//
// It fences the resources of all the keys together, as one key's token
// fences that key's: AcquireAll returns only after seeing every key held at
// one moment, every token of the set was drawn before that moment, and any
// later holder of any of the keys draws its own after the key came free,
// which is later still. That rests on the strategy noticing a loss before
// the key can go to someone else, as tablelock does (its lease counts
// itself lost a safety margin before the row expires), or on every key
// being freed at one moment, as rowlock's one transaction is. advisory
// learns of a killed session after the server has freed its keys, one by
// one: there, fence each resource with its own key's token,
// Part(key).Token().
func (m *MultiLease) Token() int64 { return m.token }

// Done is closed when any key is lost, or at Release.
func (m *MultiLease) Done() <-chan struct{} { return m.ended.Done() }

// Err is nil while every key is held. After a key is lost it matches
// ErrLockLost and names the key; after Release it matches ErrReleased.
// It asks each key's lease, so a strategy that notices a loss when asked
// (tablelock's deadline) is reported at once.
func (m *MultiLease) Err() error {
	if err := context.Cause(m.ended); err != nil {
		return err
	}
	for _, l := range m.parts {
		if l.Err() != nil {
			m.endPart(l)
			break
		}
	}
	return context.Cause(m.ended)
}

// Release gives every key back, in reverse order, and returns every
// failure joined. It is safe to defer: the first call after a loss returns
// an error matching ErrLockLost (the other keys are still released), any
// second call ErrReleased. Each key is released as its strategy does it,
// detached from ctx's cancellation.
func (m *MultiLease) Release(ctx context.Context) error {
	return m.release(ctx, false)
}

// release is Release; with rollback, the parts that hold their keys in a
// transaction (rowlock) are rolled back instead of committed.
func (m *MultiLease) release(ctx context.Context, rollback bool) error {
	if !m.released.CompareAndSwap(false, true) {
		return fmt.Errorf("sqllock: release %s: %w", m.Key(), ErrReleased)
	}
	close(m.stop)
	<-m.watcherDone

	lostErr := m.Err() // the loss, if one ended the lease before Release
	var errs []error
	for i := len(m.parts) - 1; i >= 0; i-- {
		if err := end(ctx, m.parts[i], rollback); err != nil {
			errs = append(errs, err)
		}
	}
	m.endWith(fmt.Errorf("sqllock: lease on %s: %w", m.Key(), ErrReleased))
	err := errors.Join(errs...)
	if lostErr != nil && !errors.Is(err, ErrLockLost) {
		// A part that ended without saying so on its own Release.
		err = errors.Join(lostErr, err)
	}
	if err != nil {
		return fmt.Errorf("sqllock: release %s: %w", m.Key(), err)
	}
	return nil
}
