// Package lease is the kernel every strategy's Lease is built on: the key
// and token, the end-once Done/Err state, and the Release protocol.
//
// The protocol, the same in every strategy:
//   - Release is safe to defer and to call with a context that has ended:
//     its work runs under context.WithoutCancel, bounded by ReleaseTimeout.
//   - The first call after a loss returns the loss (an error matching
//     sqllock.ErrLockLost), and still frees whatever the strategy can free;
//     every later call returns an error matching sqllock.ErrReleased.
//   - After Release, Err matches sqllock.ErrReleased, unless the lease was
//     lost first: then Err keeps the loss.
package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/leasestate"
)

// ReleaseTimeout bounds the work of one Release, and every other clean-up
// that runs detached from a caller's context.
const ReleaseTimeout = 5 * time.Second

// Base holds what every lease has. Keep it as an unexported field of a
// strategy's Lease (embedding would export Init, Lose and End) and forward
// Key, Token, Done and Err to it; call Init before handing the lease out.
// It must not be copied after.
type Base struct {
	strategy string
	key      string
	token    int64
	st       leasestate.State
}

// Init sets the strategy name (for messages), the key and the token.
func (b *Base) Init(strategy, key string, token int64) {
	b.strategy, b.key, b.token = strategy, key, token
}

// Key returns the key held.
func (b *Base) Key() string { return b.key }

// Token returns the fencing token.
func (b *Base) Token() int64 { return b.token }

// Done is closed when the lease ends: released or lost.
func (b *Base) Done() <-chan struct{} { return b.st.Done() }

// Err is nil while the lease is held, the loss after a loss, and an error
// matching sqllock.ErrReleased after Release.
func (b *Base) Err() error { return b.st.Err() }

// Lost builds the error a lost lease reports: it names the strategy, the
// key and the token, matches sqllock.ErrLockLost and says why.
func (b *Base) Lost(cause string) error {
	return fmt.Errorf("%s: lease %q (token %d): %w: %s", b.strategy, b.key, b.token, sqllock.ErrLockLost, cause)
}

// Lose ends the lease with err (see Lost) unless it has ended or Release
// has been called, and reports whether it did: either the loss is seen by
// Release, or Release by the loss.
func (b *Base) Lose(err error) bool { return b.st.Lose(err) }

// End ends the lease with err whatever came before; only the first end
// counts. For a loss found while the lease is being released.
func (b *Base) End(err error) { b.st.End(err) }

// Released returns the error a second Release returns.
func (b *Base) Released(op string) error { return &released{b, op} }

// released is ErrReleased with the strategy, the operation and the key,
// formatted only when read: every Release ends its lease with one, and
// most are never printed.
type released struct {
	b  *Base
	op string
}

func (e *released) Error() string {
	return fmt.Sprintf("%s: %s %q: %v", e.b.strategy, e.op, e.b.key, sqllock.ErrReleased)
}

func (e *released) Unwrap() error { return sqllock.ErrReleased }

// Release runs the protocol around free, the strategy's own work (give the
// key back, commit, unlock). free runs detached from ctx's cancellation,
// bounded by ReleaseTimeout, and is told of a loss that came before
// Release (lost is nil otherwise) so it can decide what is left to free.
// Release returns that loss if there was one, and free's error otherwise.
func (b *Base) Release(ctx context.Context, free func(ctx context.Context, lost error) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	return b.ReleaseIn(ctx, "release", free)
}

// ReleaseIn is Release with ctx used as given and op naming the operation
// in messages: for a release that runs inside the caller's transaction,
// where the caller's context rules.
func (b *Base) ReleaseIn(ctx context.Context, op string, free func(ctx context.Context, lost error) error) error {
	if !b.st.MarkReleased() {
		return b.Released(op)
	}
	// No loss can be recorded after MarkReleased: this is the last word.
	lost := b.st.Err()
	err := free(ctx, lost)
	b.st.End(b.Released(op))
	if lost != nil {
		return lost
	}
	return err
}
