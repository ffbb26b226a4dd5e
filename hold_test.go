package sqllock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// Hold keeps a key across a loss: the operator frees it while fn runs, fn's
// context ends with the loss, and Hold takes the key again with a larger
// token and runs fn anew, until the caller's context ends.
func TestHoldReacquiresAfterLoss(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithCancel(ctxFor(t))
		defer cancel()
		key := locktest.Key(t)
		// The force release is noticed at the next renewal (TTL/3); the
		// TTL leaves a loaded machine room for the takes themselves.
		l := newTableLocker(t, db, tablelock.WithTTL(2*time.Second))
		var tokens []int64
		var retried []error
		err := sqllock.Hold(ctx, l, key, func(ctx context.Context) error {
			token, _ := sqllock.TokenFrom(ctx)
			tokens = append(tokens, token)
			if len(tokens) == 1 {
				if _, err := l.ForceRelease(ctx, key, token); err != nil {
					return err
				}
			} else {
				cancel() // the second run is the last: the caller stops
			}
			<-ctx.Done()
			return context.Cause(ctx)
		}, sqllock.HoldBackoff(time.Millisecond, 10*time.Millisecond), sqllock.HoldOnRetry(func(err error) { retried = append(retried, err) }))
		t.Logf("Hold: %v; tokens %v; retried after %v", err, tokens, retried)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Hold: %v, want an error matching context.Canceled", err)
		}
		if len(tokens) != 2 || tokens[1] <= tokens[0] {
			t.Errorf("fn ran with tokens %v, want two runs, the second with a larger token", tokens)
		}
		if len(retried) != 1 || !errors.Is(retried[0], sqllock.ErrLockLost) {
			t.Errorf("HoldOnRetry saw %v, want the one loss", retried)
		}
	})
}

// fn returning while the lease is held ends Hold with fn's result.
func TestHoldReturnsFnResult(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	ctx := ctxFor(t)
	l := newTableLocker(t, db)
	boom := errors.New("boom")
	if err := sqllock.Hold(ctx, l, locktest.Key(t), func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Hold: %v, want fn's error", err)
	}
	if err := sqllock.Hold(ctx, l, locktest.Key(t), func(context.Context) error { return nil }); err != nil {
		t.Errorf("Hold: %v, want nil", err)
	}
}

// An acquisition that fails for a database reason is retried; one that
// no retry can mend is returned at once.
func TestHoldRetriesAcquisition(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	// A lock table that does not exist: every acquisition fails.
	l := newTableLocker(t, db, tablelock.WithTable("no_such_lock_table"))
	var mu sync.Mutex
	failures := 0
	err := sqllock.Hold(ctx, l, locktest.Key(t), func(context.Context) error {
		t.Error("fn ran without the key")
		return nil
	}, sqllock.HoldBackoff(time.Millisecond, 2*time.Millisecond), sqllock.HoldOnRetry(func(error) {
		mu.Lock()
		defer mu.Unlock()
		if failures++; failures == 3 {
			cancel()
		}
	}))
	if !errors.Is(err, context.Canceled) || failures != 3 {
		t.Errorf("Hold: %v after %d failures, want context.Canceled after 3", err, failures)
	}

	good := newTableLocker(t, db)
	for _, tc := range []struct {
		name string
		l    sqllock.Locker
		key  string
		opts []sqllock.HoldOption
		want error
	}{
		{"empty key", good, "", nil, sqllock.ErrInvalidKey},
		{"bad backoff", good, "k", []sqllock.HoldOption{sqllock.HoldBackoff(time.Second, time.Millisecond)}, sqllock.ErrInvalidOption},
		{"nil locker", nil, "k", nil, sqllock.ErrInvalidOption},
	} {
		err := sqllock.Hold(ctxFor(t), tc.l, tc.key, func(context.Context) error { return nil }, tc.opts...)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	closed := newTableLocker(t, db)
	closed.Close()
	if err := sqllock.Hold(ctxFor(t), closed, "k", func(context.Context) error { return nil }); !errors.Is(err, sqllock.ErrClosed) {
		t.Errorf("closed Locker: %v, want ErrClosed", err)
	}
}
