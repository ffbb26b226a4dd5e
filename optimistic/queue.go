package optimistic

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync"
)

// rowQueues are Modify's in-process queues (see WithLocalQueue): one per
// row in use, made on demand and dropped when nobody holds or waits for it.
//
// One queue per row, not a fixed set of buckets: a bucket makes writers of
// unrelated rows take turns, and a fn that modifies another row of the same
// bucket (a transfer) waits for its own caller forever.
//
// The queue is held from the read to the write, fn included: that is what
// keeps local writers from reading the same version and all but one
// conflicting. So a Modify nested in another Modify's fn must not wait for
// a queue, whichever row: the queue may be its caller's own, or held by a
// goroutine that waits, in its own nested Modify, for the queue of the
// caller (two transfers in opposite directions). A nested Modify finds a
// busy queue, sees its caller on its stack, and goes ahead without the
// queue, as a writer in another process would: the version check keeps it
// correct, and the queue was only ever an optimisation.
type rowQueues struct {
	mu sync.Mutex
	m  map[string]*rowQueue
}

type rowQueue struct {
	turn chan struct{} // holds a token while a writer has the turn
	refs int           // writers holding or waiting for the turn; under mu
}

// enter waits for the turn on the queue of row key and returns the
// function that gives it up. A call nested in a Modify's fn does not wait:
// it returns a no-op at once. It fails only when ctx ends first.
func (qs *rowQueues) enter(ctx context.Context, key string) (leave func(), err error) {
	qs.mu.Lock()
	if qs.m == nil {
		qs.m = map[string]*rowQueue{}
	}
	q := qs.m[key]
	if q == nil {
		q = &rowQueue{turn: make(chan struct{}, 1)}
		qs.m[key] = q
	}
	q.refs++
	qs.mu.Unlock()
	leave = func() {
		<-q.turn
		qs.drop(key, q)
	}
	select {
	case q.turn <- struct{}{}:
		return leave, nil
	default:
	}
	// Busy: only now is the stack worth walking.
	if inModifyFn() {
		qs.drop(key, q)
		return func() {}, nil
	}
	select {
	case q.turn <- struct{}{}:
		return leave, nil
	case <-ctx.Done():
		qs.drop(key, q)
		return nil, ctx.Err()
	}
}

func (qs *rowQueues) drop(key string, q *rowQueue) {
	qs.mu.Lock()
	if q.refs--; q.refs == 0 {
		delete(qs.m, key)
	}
	qs.mu.Unlock()
}

// queueKey is the queue name of a row key. Two keys that print alike share
// a queue (1 and "1", usually one row anyway); sharing costs only turns.
func queueKey(id any) string { return fmt.Sprint(id) }

// callFn calls a Modify's fn. Its frame on a goroutine's stack is how a
// Modify learns that it runs inside another one's fn; it must stay a frame
// of its own, hence noinline.
//
//go:noinline
func callFn(fn func() error) error { return fn() }

var callFnEntry = runtime.FuncForPC(reflect.ValueOf(callFn).Pointer()).Entry()

// inModifyFn reports whether the calling goroutine is inside callFn: a
// Modify called, directly or not, from another Modify's fn. Go has no
// goroutine identity; the goroutine's own stack is the one honest record
// of what it is inside (testing's t.Helper reads it the same way).
func inModifyFn() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		frames := runtime.CallersFrames(pcs[:n])
		for {
			f, more := frames.Next()
			if f.Entry == callFnEntry {
				return true
			}
			if !more {
				break
			}
		}
		if n < len(pcs) {
			return false
		}
		pcs = make([]uintptr, 2*len(pcs)) // a deep stack: look at all of it
	}
}
