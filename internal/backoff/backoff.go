// Package backoff holds the pauses every retry loop of the module takes:
// capped exponential growth with jitter, and a sleep that ends early when
// its context does.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/sqllock/sqllock/internal/ctxend"
)

// Exp is capped exponential backoff. The zero value is not useful: set Min
// and Max (Min > 0, Max >= Min).
type Exp struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns the next pause with equal jitter (uniform in the upper half
// of the current step, so waiters that failed together spread out but none
// retries at once) and doubles the step, up to Max.
func (e *Exp) Next() time.Duration { return Jitter(e.Advance()) }

// Advance returns the current step without jitter and doubles it, up to
// Max.
func (e *Exp) Advance() time.Duration {
	d := e.Step()
	e.cur = min(2*d, e.Max)
	return d
}

// Step returns the current step without jitter and without advancing.
func (e *Exp) Step() time.Duration {
	if e.cur == 0 {
		e.cur = e.Min
	}
	return e.cur
}

// AtMax moves the step to Max: for a waiter that expects no wake-up soon.
func (e *Exp) AtMax() { e.cur = e.Max }

// Cap lowers the current step to d, if it is longer.
func (e *Exp) Cap(d time.Duration) { e.cur = max(min(e.Step(), d), e.Min) }

// Reset starts the steps from Min again.
func (e *Exp) Reset() { e.cur = 0 }

// Jitter returns a duration uniform in [d/2, d].
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Sleep pauses for d, or until ctx ends; then it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctxend.Err(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retry calls fn until it returns nil, an error retryable does not accept,
// or ctx ends, pausing with e between calls. It returns fn's last error,
// also when ctx ends during a pause: the cause of the failure is worth more
// to the caller than ctx.Err(), which it can read itself.
func Retry(ctx context.Context, e Exp, retryable func(error) bool, fn func(ctx context.Context) error) error {
	for {
		err := fn(ctx)
		if err == nil || !retryable(err) || ctxend.Err(ctx) != nil {
			return err
		}
		if Sleep(ctx, e.Next()) != nil {
			return err
		}
	}
}
