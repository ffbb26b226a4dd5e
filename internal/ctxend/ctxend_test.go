package ctxend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/ctxend"
)

// passed is a context whose deadline has passed but whose Done closes
// only when end is cancelled (never, if it is not).
type passed struct{ context.Context }

func (passed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

func TestErr(t *testing.T) {
	if err := ctxend.Err(context.Background()); err != nil {
		t.Fatalf("no deadline: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := ctxend.Err(ctx); err != nil {
		t.Fatalf("deadline ahead: %v", err)
	}
	cancel()
	if err := ctxend.Err(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}

	// A timer that fires soon after: Err waits for it, and ctx agrees.
	late, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	c := passed{late}
	if err := ctxend.Err(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("passed deadline, late timer: %v", err)
	}
	if c.Err() == nil {
		t.Fatal("Err returned before the context ended")
	}

	// A timer that never fires: Err still says the deadline passed.
	never, stop2 := context.WithCancel(context.Background())
	defer stop2()
	if err := ctxend.Err(passed{never}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("passed deadline, no timer: %v", err)
	}
}

func ExampleErr() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	time.Sleep(2 * time.Millisecond)
	fmt.Println(ctxend.Err(ctx))
	// Output: context deadline exceeded
}

func TestEnded(t *testing.T) {
	dial := errors.New("dial tcp: i/o timeout")
	if err := ctxend.Ended(context.Background(), dial); err != nil {
		t.Fatalf("live context: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ctxend.Ended(ctx, dial); !errors.Is(err, context.Canceled) || !errors.Is(err, dial) {
		t.Fatalf("ended, own cause: %v, want both", err)
	}
	wrapped := fmt.Errorf("take: %w", context.Canceled)
	if err := ctxend.Ended(ctx, wrapped); err != wrapped {
		t.Fatalf("ended, cause is ctx's: %v, want it as is", err)
	}
	if err := ctxend.Ended(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended, no error: %v", err)
	}
}
