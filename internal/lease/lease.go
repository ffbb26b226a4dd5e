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
//
// The root's MultiLease cannot use this package, which imports the root
// for its sentinel errors: it keeps its end-once state in a context.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/telemetry"
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
	st       state

	tel      *telemetry.T // nil until Observe, or for a lease For gave none
	telKey   string       // the key its telemetry carries (For)
	held     telemetry.Held
	recorded atomic.Bool // the end went to telemetry
}

// Init sets the strategy name (for messages), the key and the token.
func (b *Base) Init(strategy, key string, token int64) {
	b.strategy, b.key, b.token = strategy, key, token
}

// Observe starts the lease's telemetry (the active count, the lease span);
// ctx is the acquisition's. Call it once, before the lease can be lost or
// released, and Drop for a lease that is never handed out.
// Under a primitive's call (telemetry.Within) it records on the
// primitive's instruments, or not at all.
func (b *Base) Observe(ctx context.Context, t *telemetry.T) {
	if t == nil {
		return
	}
	t, key := t.For(ctx, b.key)
	if t == nil {
		return
	}
	b.tel, b.telKey = t, key
	b.held = t.StartLease(ctx, key, b.token)
}

// Drop undoes Observe for a lease that is not handed out after all.
func (b *Base) Drop() {
	if b.tel != nil && b.recorded.CompareAndSwap(false, true) {
		b.held.Drop()
	}
}

// SpanContext is the lease's span, which sqllock.Do makes the parent of
// the work it runs; invalid when tracing is off.
func (b *Base) SpanContext() trace.SpanContext { return b.held.SpanContext() }

// Event records a background event (a renewal retried or failed) on the
// lease's span; background work makes no spans of its own.
func (b *Base) Event(name string, err error) {
	if b.tel != nil {
		b.held.Event(name, err)
	}
}

// observeEnd records the end of the lease once: lost when err is a loss.
func (b *Base) observeEnd(err error) {
	if b.tel == nil || !b.recorded.CompareAndSwap(false, true) {
		return
	}
	cause := ""
	var le *lostError
	if errors.As(err, &le) {
		cause = telemetry.Cause(le.cause)
	} else if errors.Is(err, sqllock.ErrLockLost) {
		cause = telemetry.CauseOther
	}
	b.held.End(cause)
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
	return &lostError{b: b, cause: cause}
}

// lostError is Lost's error: the cause kept apart, for the loss metric.
type lostError struct {
	b     *Base
	cause string
}

func (e *lostError) Error() string {
	return fmt.Sprintf("%s: lease %q (token %d): %v: %s", e.b.strategy, e.b.key, e.b.token, sqllock.ErrLockLost, e.cause)
}

func (e *lostError) Unwrap() error { return sqllock.ErrLockLost }

// Lose ends the lease with err (see Lost) unless it has ended or Release
// has been called, and reports whether it did: either the loss is seen by
// Release, or Release by the loss.
func (b *Base) Lose(err error) bool {
	if !b.st.Lose(err) {
		return false
	}
	b.observeEnd(err)
	return true
}

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
	if b.tel == nil {
		err := free(ctx, lost)
		b.st.End(b.Released(op))
		if lost != nil {
			return lost
		}
		return err
	}
	ctx, sp := b.tel.StartRelease(ctx, b.telKey, b.token)
	err := free(ctx, lost)
	b.st.End(b.Released(op))
	if lost != nil {
		err = lost
	} else {
		// A loss that free found (the row was gone) ends it as lost.
		b.observeEnd(err)
	}
	telemetry.EndSpan(sp, err)
	return err
}

// EndAcquire ends an acquisition's telemetry with what Acquire returns:
// the lease (when err is nil) and the tries made (0: not counted).
func EndAcquire(ctx context.Context, a telemetry.Acquisition, l sqllock.Lease, attempts int, err error) {
	var token int64
	if err == nil && l != nil {
		token = l.Token()
	}
	a.End(ctx, telemetry.Outcome(ctx, err, isRefusal), token, attempts, err)
}

func isRefusal(err error) bool { return errors.Is(err, sqllock.ErrNotAcquired) }
