package optimistic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
)

// Policy decides whether, and after what pause, to try again. It has one
// method and no state, so one Policy is safely shared by every goroutine
// (unlike a counter-carrying strategy object, which would have to be built
// per call).
type Policy interface {
	// Backoff is asked after the failed attempt number attempt (1 for the
	// first). It returns the pause before the next one, or false to stop.
	Backoff(attempt int) (pause time.Duration, again bool)
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(attempt int) (time.Duration, bool)

// Backoff calls f.
func (f PolicyFunc) Backoff(attempt int) (time.Duration, bool) { return f(attempt) }

// The bounds of DefaultPolicy's backoff.
const (
	DefaultMinBackoff = 100 * time.Microsecond
	DefaultMaxBackoff = 20 * time.Millisecond
)

// DefaultAttempts is DefaultPolicy's limit.
const DefaultAttempts = 20

// DefaultPolicy is used when Retry is given a nil Policy: up to
// DefaultAttempts attempts, capped exponential backoff with jitter between
// DefaultMinBackoff and DefaultMaxBackoff.
var DefaultPolicy = LimitAttempts(ExponentialBackoff(DefaultMinBackoff, DefaultMaxBackoff), DefaultAttempts)

// NoRetry makes one attempt only.
func NoRetry() Policy {
	return PolicyFunc(func(int) (time.Duration, bool) { return 0, false })
}

// ExponentialBackoff doubles the pause from min after each failure, up to
// max, and draws it uniformly from its upper half. The jitter keeps writers
// that lost the same race from meeting again at the next attempt. It never
// stops by itself: bound it with LimitAttempts or the context's deadline.
func ExponentialBackoff(min, max time.Duration) Policy {
	return expBackoff{min: min, max: max}
}

type expBackoff struct{ min, max time.Duration }

func (e expBackoff) Backoff(attempt int) (time.Duration, bool) {
	d := e.min
	for i := 1; i < attempt && d < e.max; i++ {
		d *= 2
	}
	return backoff.Jitter(min(d, e.max)), true
}

func (e expBackoff) validate() error {
	if e.min <= 0 || e.max < e.min {
		return fmt.Errorf("%w: exponential backoff wants 0 < min <= max, got min %v, max %v", sqllock.ErrInvalidOption, e.min, e.max)
	}
	return nil
}

// LimitAttempts stops p after n attempts in all (the first one included).
// n must be at least 1: Retry refuses a policy that allows no attempt.
func LimitAttempts(p Policy, n int) Policy { return limited{p: p, n: n} }

type limited struct {
	p Policy
	n int
}

func (l limited) Backoff(attempt int) (time.Duration, bool) {
	if attempt >= l.n {
		return 0, false
	}
	return l.p.Backoff(attempt)
}

func (l limited) validate() error {
	if l.n < 1 {
		return fmt.Errorf("%w: LimitAttempts(%d): at least one attempt is needed", sqllock.ErrInvalidOption, l.n)
	}
	if l.p == nil {
		return fmt.Errorf("%w: LimitAttempts of a nil policy", sqllock.ErrInvalidOption)
	}
	return validatePolicy(l.p)
}

func validatePolicy(p Policy) error {
	if v, ok := p.(interface{ validate() error }); ok {
		return v.validate()
	}
	return nil
}

// stopErr carries a caller's error out of Retry without a retry.
type stopErr struct{ err error }

func (s stopErr) Error() string { return s.err.Error() }
func (s stopErr) Unwrap() error { return s.err }

// Stop wraps err so that Retry returns it (unwrapped) at once, even when it
// matches sqllock.ErrConflict. Use it for business reasons to give up, such
// as "sold out". Stop(nil) is nil.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return stopErr{err}
}

// Retry calls fn until it returns nil, an error that is not worth retrying,
// or p says stop; ctx bounds the whole loop, pauses included.
//
// Retried: errors matching sqllock.ErrConflict and transient database errors
// (serialization failures, deadlocks, SQLite busy, a dropped connection).
// Anything else, and any error wrapped with Stop, is returned at once as fn
// returned it. When p gives up, the error says how many attempts were made
// and wraps the last one, so it still matches ErrConflict. When ctx ends,
// the last error is joined with ctx.Err(). A nil p means DefaultPolicy.
// RetryStats also reports how many attempts were made.
func Retry(ctx context.Context, p Policy, fn func(ctx context.Context) error) error {
	_, err := RetryStats(ctx, p, fn)
	return err
}

// Stats is what one Retry or Modify call did. Attempts-1 is the number of
// retries. Conflicts and Transient count, by cause, the failed attempts
// that were worth another try, even when the policy or the context then
// allowed none; an error that ended the call at once (a Stop, a permanent
// error) is in neither.
type Stats struct {
	Attempts  int // calls of the function, the last one included
	Conflicts int // failed with an error matching sqllock.ErrConflict
	Transient int // failed with a transient database error
}

// RetryStats is Retry, and also reports the attempts it made, on failure as
// well as on success, so that callers can watch the retry rate without
// wrapping the policy.
func RetryStats(ctx context.Context, p Policy, fn func(ctx context.Context) error) (Stats, error) {
	var st Stats
	if fn == nil {
		return st, fmt.Errorf("optimistic: retry: %w: nil function", sqllock.ErrInvalidOption)
	}
	if p == nil {
		p = DefaultPolicy
	}
	if err := validatePolicy(p); err != nil {
		return st, fmt.Errorf("optimistic: retry: %w", err)
	}
	var last error // the failed attempt before this one
	for attempt := 1; ; attempt++ {
		if err := ctxend.Err(ctx); err != nil {
			if last != nil { // a policy without pauses comes here, not to the select
				return st, errors.Join(last, err)
			}
			return st, err
		}
		st.Attempts = attempt
		err := fn(ctx)
		if err == nil {
			return st, nil
		}
		if s, ok := errors.AsType[stopErr](err); ok {
			return st, s.err
		}
		switch {
		case errors.Is(err, sqllock.ErrConflict):
			st.Conflicts++
		case dberr.IsRetryable(err):
			st.Transient++
		default:
			return st, err
		}
		pause, again := p.Backoff(attempt)
		if !again {
			return st, fmt.Errorf("optimistic: gave up after %d attempts: %w", attempt, err)
		}
		last = err
		if backoff.Sleep(ctx, pause) != nil {
			return st, errors.Join(err, ctxend.Err(ctx))
		}
	}
}
