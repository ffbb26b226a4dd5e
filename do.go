package sqllock

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"
)

type leaseKey struct{}

// Do acquires key on l, blocking until it is held or ctx ends, runs fn and
// releases. The context fn receives is cancelled the moment the lease is
// lost, with the loss as its cause (context.Cause matches ErrLockLost), and
// carries the lease: fn can pass ctx down and let the writer read the fencing
// token with TokenFrom instead of threading it by hand.
//
// When fn returns an error and the lease holds its key in the transaction
// fn worked in (rowlock: Lease.Tx, TxFrom), Do rolls that transaction
// back instead of committing it: a failed fn leaves nothing behind.
//
// Do returns fn's error joined with any error from Release; a lease lost
// while fn ran makes the result match ErrLockLost even if fn returned nil,
// and when the loss cancelled fn, the loss comes first in the message
// (before fn's "context canceled").
func Do(ctx context.Context, l Locker, key string, fn func(ctx context.Context) error) error {
	if l == nil || fn == nil {
		return fmt.Errorf("sqllock: Do %q: %w: nil locker or function", key, ErrInvalidOption)
	}
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}

// run executes fn under lease and releases it.
func run(ctx context.Context, lease Lease, fn func(ctx context.Context) error) error {
	wctx := context.WithValue(ctx, leaseKey{}, lease)
	if t, ok := lease.(traced); ok {
		// The work is a child of the lease's span, when tracing is on.
		if sc := t.SpanContext(); sc.IsValid() {
			wctx = trace.ContextWithSpanContext(wctx, sc)
		}
	}
	fctx, cancel := context.WithCancelCause(wctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-lease.Done():
			cause := lease.Err()
			if cause == nil {
				cause = ErrLockLost
			}
			cancel(cause)
		case <-fctx.Done():
		}
	}()
	fnErr := fn(fctx)
	lostFirst := fctx.Err() != nil && errors.Is(context.Cause(fctx), ErrLockLost)
	cancel(nil)
	<-watchDone // no goroutine outlives Do
	relErr := end(context.WithoutCancel(ctx), lease, fnErr != nil)
	if lostFirst && !errors.Is(fnErr, ErrLockLost) {
		// fn saw its context end and said "context canceled"; the reason
		// was the loss, which Release reports: say it first.
		loss := relErr
		if !errors.Is(loss, ErrLockLost) {
			loss = errors.Join(context.Cause(fctx), relErr)
		}
		return errors.Join(loss, fnErr)
	}
	return errors.Join(fnErr, relErr)
}

// traced is a lease with a span of its own: every strategy's.
type traced interface {
	SpanContext() trace.SpanContext
}

// rollbacker is a lease whose keys are held by a transaction that the
// work runs in (rowlock): it can end by undoing that work.
type rollbacker interface {
	Rollback(ctx context.Context) error
}

// composite is a lease made of leases (MultiLease, also inside a type of
// the caller's that embeds it): it ends each part as end does.
type composite interface {
	release(ctx context.Context, rollback bool) error
}

// end releases lease after fn; after a failed fn, a lease that holds its
// keys in the work's transaction is rolled back instead of committed.
func end(ctx context.Context, lease Lease, failed bool) error {
	if c, ok := lease.(composite); ok {
		return c.release(ctx, failed)
	}
	if r, ok := lease.(rollbacker); failed && ok {
		return r.Rollback(ctx)
	}
	return lease.Release(ctx)
}

// LeaseFrom returns the lease held by the Do (or DoLease) that made ctx.
func LeaseFrom(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// TokenFrom returns the fencing token of the lease held by the enclosing Do.
func TokenFrom(ctx context.Context) (int64, bool) {
	l, ok := LeaseFrom(ctx)
	if !ok {
		return 0, false
	}
	return l.Token(), true
}

// DoLease is Do for a lease the caller already holds (from TryAcquire, or
// AcquireAll): it runs fn under the same loss-cancellation and releases the
// lease afterwards.
func DoLease(ctx context.Context, lease Lease, fn func(ctx context.Context) error) error {
	if lease == nil || fn == nil {
		return fmt.Errorf("sqllock: DoLease: %w: nil lease or function", ErrInvalidOption)
	}
	return run(ctx, lease, fn)
}
