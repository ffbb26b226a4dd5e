// Package ctxend tells whether a context has ended without waiting for its
// timer: a deadline that has passed counts as the end.
package ctxend

import (
	"context"
	"errors"
	"time"
)

// settle bounds the wait for a passed deadline's timer to end the context.
const settle = 50 * time.Millisecond

// Err is ctx.Err(), except that once ctx's deadline has passed it is
// context.DeadlineExceeded even if ctx's timer has not fired yet. An I/O
// deadline taken from ctx (a dial, a socket read) can fail a statement a
// moment before ctx reports its end; the failure is then the deadline's,
// and must be told as such, not as a database error. Err waits briefly for
// the timer, so that ctx.Err() agrees once it has returned.
func Err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dl, ok := ctx.Deadline()
	if !ok || time.Now().Before(dl) {
		return nil
	}
	t := time.NewTimer(settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return context.DeadlineExceeded
	}
}

// Ended is nil while ctx has not ended (see Err), and otherwise err joined
// with ctx's error, unless err matches it already: an attempt that failed
// as ctx ended, for a cause of its own (a dial cut short reports an i/o
// timeout), is told as both.
func Ended(ctx context.Context, err error) error {
	cerr := Err(ctx)
	switch {
	case cerr == nil:
		return nil
	case errors.Is(err, cerr):
		return err
	}
	return errors.Join(cerr, err)
}
