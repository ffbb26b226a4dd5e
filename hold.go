package sqllock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
)

// HoldOption configures Hold.
type HoldOption func(*holdConfig) error

type holdConfig struct {
	min, max time.Duration
	onRetry  func(error)
}

// HoldBackoff sets Hold's pauses after a loss or a failed acquisition:
// from min, doubling up to max, with jitter (default 100ms to 10s). A
// successful acquisition starts them from min again.
func HoldBackoff(min, max time.Duration) HoldOption {
	return func(c *holdConfig) error {
		if min <= 0 || max < min {
			return fmt.Errorf("%w: hold backoff %v to %v: want 0 < min <= max", ErrInvalidOption, min, max)
		}
		c.min, c.max = min, max
		return nil
	}
}

// HoldOnRetry calls f with every loss and every failed acquisition that
// Hold recovers from, before its pause: to log them. f runs on Hold's
// goroutine.
func HoldOnRetry(f func(err error)) HoldOption {
	return func(c *holdConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil HoldOnRetry function", ErrInvalidOption)
		}
		c.onRetry = f
		return nil
	}
}

// Hold keeps key on l for as long as ctx lasts, and runs fn while it holds
// it: the loop a long-running worker (a consumer, a leader, a sync loop)
// otherwise writes by hand around Do.
//
// Hold acquires key (blocking, as Acquire does) and runs fn as Do would:
// fn's context carries the lease and is cancelled the moment the lease is
// lost. When fn returns after a loss, Hold pauses (HoldBackoff), acquires
// the key again, with a new and larger fencing token, and runs fn again
// from the start. A new holder resumes work that someone else may have
// touched meanwhile, so fn should claim its resources before it reads
// them (fence.Claim). An acquisition that fails for a database reason is
// retried the same way.
//
// Hold returns when fn returns while its lease is still held (fn's error,
// nil included, joined with Release's), when ctx ends (an error matching
// ctx.Err()), or when an acquisition fails for a reason no retry can
// mend: an invalid key, a dialect the strategy cannot serve, a closed
// Locker.
func Hold(ctx context.Context, l Locker, key string, fn func(ctx context.Context) error, opts ...HoldOption) error {
	if l == nil || fn == nil {
		return fmt.Errorf("sqllock: hold %q: %w: nil locker or function", key, ErrInvalidOption)
	}
	cfg := holdConfig{min: 100 * time.Millisecond, max: 10 * time.Second, onRetry: func(error) {}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return fmt.Errorf("sqllock: hold %q: %w", key, err)
		}
	}
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("sqllock: hold %q: %w", key, err)
	}
	pause := backoff.Exp{Min: cfg.min, Max: cfg.max}
	for {
		lease, err := l.Acquire(ctx, key)
		if err == nil {
			pause.Reset()
			err = run(ctx, lease, fn)
			if !errors.Is(err, ErrLockLost) || ctxend.Err(ctx) != nil {
				return err
			}
		} else if ctxend.Err(ctx) != nil || !retryAcquire(err) {
			return err
		}
		cfg.onRetry(err)
		if backoff.Sleep(ctx, pause.Next()) != nil {
			return fmt.Errorf("sqllock: hold %q: %w (after: %w)", key, ctxend.Err(ctx), err)
		}
	}
}

// retryAcquire reports whether a failed acquisition may succeed if tried
// again: not when the request itself is wrong or the Locker is closed.
func retryAcquire(err error) bool {
	for _, permanent := range []error{ErrInvalidKey, ErrInvalidOption, ErrUnsupported, ErrClosed} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	return true
}
