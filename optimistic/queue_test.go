package optimistic

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRowQueues: rows queue apart; a second writer of a row waits for the
// first; a nested caller (inside callFn) does not wait, on its caller's row
// or any other; a cancelled wait gives up; idle queues are dropped.
func TestRowQueues(t *testing.T) {
	var qs rowQueues
	ctx := context.Background()
	leaveA, err := qs.enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Another row: its own queue, free.
	leaveB, err := qs.enter(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	leaveB()

	// A second writer of a waits until the first leaves.
	entered := make(chan func())
	go func() {
		leave, err := qs.enter(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		entered <- leave
	}()
	select {
	case <-entered:
		t.Fatal("a second writer of a row did not wait for the first")
	case <-time.After(50 * time.Millisecond):
	}

	// Nested in a Modify's fn, on the busy row: no wait, no turn taken.
	err = callFn(func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		leave, err := qs.enter(cctx, "a")
		if err != nil {
			return err
		}
		leave()
		return nil
	})
	if err != nil {
		t.Fatalf("nested enter on a busy row = %v, want at once", err)
	}

	leaveA()
	select {
	case leave := <-entered:
		leave()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting writer never got its turn")
	}

	// A wait ends with its context.
	leaveA, _ = qs.enter(ctx, "a")
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := qs.enter(cctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("enter past its deadline = %v", err)
	}
	leaveA()
	if n := len(qs.m); n != 0 {
		t.Errorf("%d queues left after every writer left, want none", n)
	}
}
