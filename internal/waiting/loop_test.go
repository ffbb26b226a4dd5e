package waiting

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/sqllock/sqllock/internal/backoff"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lock is an in-memory key a try can take: enough to drive the loop.
type lock struct {
	mu   sync.Mutex
	held bool
}

func (l *lock) try(context.Context, Turn) (Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return Result{Remaining: -1}, nil
	}
	l.held = true
	return Result{Won: true}, nil
}

// slow polling: only a wake-up can make a waiter try again within a test.
var slow = backoff.Exp{Min: time.Hour, Max: time.Hour}

func TestTryOnce(t *testing.T) {
	q := NewQueue(Coalesce)
	var l lock
	s := Spec{Queue: q, Key: "k", Backoff: slow, Try: l.try}
	if err := Run(context.Background(), s); err != nil {
		t.Fatalf("try on a free key = %v", err)
	}
	if err := Run(context.Background(), s); !errors.Is(err, ErrRefused) {
		t.Fatalf("try on a held key = %v, want ErrRefused", err)
	}
	fatal := errors.New("syntax error")
	s.Try = func(context.Context, Turn) (Result, error) { return Result{}, fatal }
	if err := Run(context.Background(), s); !errors.Is(err, fatal) {
		t.Fatalf("try failing = %v, want its error", err)
	}
	// The server refusing a lock wait settled it: held.
	s.Try = func(context.Context, Turn) (Result, error) { return Result{}, &mysql.MySQLError{Number: 1205} }
	if err := Run(context.Background(), s); !errors.Is(err, ErrRefused) {
		t.Fatalf("lock wait timeout on a try = %v, want ErrRefused", err)
	}
	// A transient error ends a non-blocking call with that error: nothing
	// was learnt about the key.
	lost := &mysql.MySQLError{Number: 2013}
	s.Try = func(context.Context, Turn) (Result, error) { return Result{}, lost }
	if err := Run(context.Background(), s); !errors.Is(err, lost) {
		t.Fatalf("lost connection on a try = %v, want that error", err)
	}
}

func TestWaiterWokenByRelease(t *testing.T) {
	q := NewQueue(Coalesce)
	l := lock{held: true}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Try: l.try})
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("waiter returned %v while the key was held", err)
	default:
	}
	l.mu.Lock()
	l.held = false
	l.mu.Unlock()
	q.Signal("k")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("woken waiter = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a release did not wake the waiter")
	}
}

// TestWakeTriesAgain: a waiter's own Wake makes it try again at once,
// while the waiter queued ahead of it in the process, woken by nothing,
// sleeps on: a grant is for one waiter.
func TestWakeTriesAgain(t *testing.T) {
	q := NewQueue(Coalesce)
	l := lock{held: true}
	ahead := make(chan error, 1)
	actx, acancel := context.WithCancel(context.Background())
	defer acancel()
	go func() {
		ahead <- Run(actx, Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Try: l.try})
	}()
	time.Sleep(20 * time.Millisecond)
	wake := make(chan struct{}, 1)
	var tries atomic.Int32
	granted := atomic.Bool{}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Wake: wake,
			Try: func(context.Context, Turn) (Result, error) {
				tries.Add(1)
				return Result{Won: granted.Load(), Remaining: -1}, nil
			}})
	}()
	time.Sleep(20 * time.Millisecond)
	granted.Store(true)
	wake <- struct{}{}
	select {
	case err := <-done:
		if err != nil || tries.Load() != 1 {
			t.Fatalf("woken waiter = %v after %d tries; want a win at its first try (queued behind another, it waits first)", err, tries.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wake did not make the waiter try again")
	}
	select {
	case err := <-ahead:
		t.Fatalf("the waiter ahead returned %v; nothing woke it", err)
	default:
	}
	acancel()
	<-ahead
}

func TestCancelLeavesQueue(t *testing.T) {
	q := NewQueue(Coalesce)
	l := lock{held: true}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := Run(ctx, Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Try: l.try})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the deadline", err)
	}
	if !q.First("k", nil) || !joinAlone(q) {
		t.Fatal("the cancelled waiter stayed queued")
	}
}

func joinAlone(q *Queue) bool {
	w, ahead := q.Join("k")
	defer q.Leave("k", w, false, false)
	return !ahead
}

// A waiter that joins behind another waits for its turn instead of
// trying; a reentrant one tries at once.
func TestJoinBehindOthers(t *testing.T) {
	q := NewQueue(Coalesce)
	first, _ := q.Join("k")
	defer q.Leave("k", first, false, false)
	var tries atomic.Int32
	try := func(context.Context, Turn) (Result, error) {
		tries.Add(1)
		return Result{Won: true}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := Run(ctx, Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Try: try}); !errors.Is(err, context.DeadlineExceeded) || tries.Load() != 0 {
		t.Fatalf("behind another waiter: Run = %v after %d tries, want to wait its turn without trying", err, tries.Load())
	}
	if err := Run(context.Background(), Spec{Queue: q, Key: "k", Wait: true, Reentry: true, Backoff: slow, Try: try}); err != nil || tries.Load() != 1 {
		t.Fatalf("reentrant: Run = %v after %d tries, want one winning try", err, tries.Load())
	}
}

// A wake-up that arrives while a try fails transiently is not spent: the
// waiter tries again at once.
func TestTransientKeepsWakeup(t *testing.T) {
	q := NewQueue(Coalesce)
	var n atomic.Int32
	try := func(context.Context, Turn) (Result, error) {
		switch n.Add(1) {
		case 1:
			return Result{Remaining: -1}, nil // refused
		case 2:
			q.Signal("k") // a release during the try
			return Result{}, &mysql.MySQLError{Number: 2013}
		}
		return Result{Won: true}, nil
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Try: try})
	}()
	time.Sleep(10 * time.Millisecond)
	q.Signal("k")
	select {
	case err := <-done:
		if err != nil || n.Load() != 3 {
			t.Fatalf("Run = %v after %d tries, want a win at the third", err, n.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a wake-up during a transient failure was lost")
	}
}

func TestClosedWakes(t *testing.T) {
	q := NewQueue(Coalesce)
	closed := make(chan struct{})
	errClosed := errors.New("closed")
	var isClosed atomic.Bool
	try := func(context.Context, Turn) (Result, error) {
		if isClosed.Load() {
			return Result{}, errClosed
		}
		return Result{Remaining: -1}, nil
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Closed: closed, Try: try})
	}()
	time.Sleep(10 * time.Millisecond)
	isClosed.Store(true)
	close(closed)
	select {
	case err := <-done:
		if !errors.Is(err, errClosed) {
			t.Fatalf("Run after Close = %v, want the try's closed error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing did not wake the waiter")
	}
}

func TestPause(t *testing.T) {
	e := backoff.Exp{Min: 4 * time.Millisecond, Max: 64 * time.Millisecond}
	s := Spec{Listening: true}
	if d := pause(&s, &e, Result{Remaining: 30 * time.Millisecond}, true); d < 31*time.Millisecond || d > 33*time.Millisecond {
		t.Fatalf("listening, holder's lease 30ms: pause %v, want just past it", d)
	}
	s.Listening = false
	if d := pause(&s, &e, Result{Remaining: -1}, true); d < 2*time.Millisecond || d > 4*time.Millisecond {
		t.Fatalf("head, first pause %v, want within the first step", d)
	}
	if d := pause(&s, &e, Result{Remaining: -1}, false); d < 32*time.Millisecond || d > 64*time.Millisecond {
		t.Fatalf("behind the head: pause %v, want the cap", d)
	}
}

// TestTurnedCapsBackoff: a waiter that sees a new holder polls again
// within turnCap, however long it had backed off; one that keeps seeing
// the same holder, or cannot tell, backs off as before.
func TestTurnedCapsBackoff(t *testing.T) {
	e := backoff.Exp{Min: time.Millisecond, Max: 100 * time.Millisecond}
	var last int64
	for range 10 {
		turned(&e, &last, Result{Holder: 7})
		e.Advance()
	}
	if e.Step() != e.Max {
		t.Fatalf("one holder all along: step %v, want the cap %v", e.Step(), e.Max)
	}
	turned(&e, &last, Result{Holder: 0})
	if e.Step() != e.Max {
		t.Fatalf("holder unknown: step %v, want it unchanged at %v", e.Step(), e.Max)
	}
	turned(&e, &last, Result{Holder: 9})
	if e.Step() != turnCap {
		t.Fatalf("a new holder: step %v, want %v", e.Step(), turnCap)
	}
	e.Advance()
	turned(&e, &last, Result{Holder: 9})
	if e.Step() != 2*turnCap {
		t.Fatalf("the same holder again: step %v, want it grown to %v", e.Step(), 2*turnCap)
	}
	e.Reset()
	turned(&e, &last, Result{Holder: 11})
	if e.Step() != e.Min {
		t.Fatalf("a new holder below the cap: step %v, want it left at %v", e.Step(), e.Min)
	}
}

// heldFor is a try on a key held by another for an hour: the refusal
// tells how long the claim lasts, so the head of the queue may block.
func heldFor(l *lock) func(context.Context, Turn) (Result, error) {
	return func(ctx context.Context, t Turn) (Result, error) {
		r, err := l.try(ctx, t)
		if !r.Won {
			r.Remaining = time.Hour
		}
		return r, err
	}
}

// TestBlockLetsThrough: a waiter blocked in Block tries again as soon as
// Block lets it through; polling (an hour) could not wake it in time.
func TestBlockLetsThrough(t *testing.T) {
	q := NewQueue(Coalesce)
	l := lock{held: true}
	gate := make(chan struct{})
	blocked := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Try: heldFor(&l),
			Block: func(ctx context.Context, d time.Duration) (bool, bool) {
				if d < time.Hour {
					t.Errorf("Block for %v, want the holder's remaining hour at least", d)
				}
				blocked <- struct{}{}
				select {
				case <-gate:
					return true, true
				case <-ctx.Done():
					return false, true
				}
			}})
	}()
	<-blocked
	l.mu.Lock()
	l.held = false
	l.mu.Unlock()
	close(gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not let through by Block")
	}
}

// TestBlockEndsWithContext: a cancelled waiter ends its Block before Run
// returns, so nothing is left waiting in the server.
func TestBlockEndsWithContext(t *testing.T) {
	q := NewQueue(Coalesce)
	l := lock{held: true}
	var ended atomic.Bool
	blocked := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Spec{Queue: q, Key: "k", Wait: true, Backoff: slow, Try: heldFor(&l),
			Block: func(bctx context.Context, d time.Duration) (bool, bool) {
				blocked <- struct{}{}
				<-bctx.Done()
				time.Sleep(10 * time.Millisecond) // the kill's round trip
				ended.Store(true)
				return false, true
			}})
	}()
	<-blocked
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if !ended.Load() {
		t.Fatal("Run returned before its Block ended")
	}
}

// TestBlockPassedAtOncePauses: a Block that lets the waiter through while
// the key stays held (nobody keeps the gate) is followed by a pause, not
// by another Block at once: a waiter never spins on an unkept gate.
func TestBlockPassedAtOncePauses(t *testing.T) {
	q := NewQueue(Coalesce)
	l := lock{held: true}
	var blocks, tries atomic.Int32
	second := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	try := heldFor(&l)
	go func() {
		done <- Run(ctx, Spec{Queue: q, Key: "k", Wait: true, Backoff: slow,
			Try: func(ctx context.Context, t Turn) (Result, error) {
				if tries.Add(1) == 2 {
					close(second)
				}
				return try(ctx, t)
			},
			Block: func(context.Context, time.Duration) (bool, bool) {
				blocks.Add(1)
				return true, true
			}})
	}()
	<-second
	time.Sleep(50 * time.Millisecond) // room for a wrong second Block
	cancel()
	<-done
	if n := blocks.Load(); n != 1 {
		t.Fatalf("%d Blocks after a pass on a held key, want 1 and then a pause", n)
	}
}

// TestBound: a waiter that hears nothing, and whose pause would last an
// hour (a listening waiter told the holder's claim lasts that long), looks
// again within the bound, and takes the key freed meanwhile without a
// word.
func TestBound(t *testing.T) {
	q := NewQueue(Coalesce)
	var l lock
	l.held = true
	var tries atomic.Int32
	s := Spec{Queue: q, Key: "k", Wait: true, Listening: true, Backoff: slow, Bound: 50 * time.Millisecond,
		Try: func(ctx context.Context, turn Turn) (Result, error) {
			tries.Add(1)
			r, err := l.try(ctx, turn)
			if !r.Won {
				r.Remaining = time.Hour
			}
			return r, err
		}}
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), s) }()
	for tries.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	l.mu.Lock()
	l.held = false // freed without a wake-up
	l.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter that heard nothing did not look again within the bound")
	}
}

// TestLine: a refused waiter takes its place in line once per Run, and
// once first polls at its quickest while the holders change (a waiter
// without a place polls every 8-16 ms then: turnCap); it leaves the line
// once, when it won or gave up, and a place got as its wait was cut off
// is left too.
func TestLine(t *testing.T) {
	const holders = 20
	type place struct{ calls, leaves atomic.Int32 }
	run := func(p *place, give bool) (time.Duration, error) {
		start := time.Now()
		err := Run(context.Background(), Spec{
			Queue: NewQueue(Coalesce), Key: "k", Wait: true,
			Backoff: backoff.Exp{Min: time.Millisecond, Max: time.Hour},
			Line: func(context.Context, time.Duration) (func(), bool) {
				p.calls.Add(1)
				if !give {
					return nil, true // its line wait ended without a place
				}
				return func() { p.leaves.Add(1) }, true
			},
			Try: func(_ context.Context, turn Turn) (Result, error) {
				if turn.Tries < holders {
					return Result{Remaining: -1, Holder: int64(turn.Tries + 1)}, nil
				}
				return Result{Won: true}, nil
			},
		})
		return time.Since(start), err
	}
	var lined, polled place
	withLine, err := run(&lined, true)
	if err != nil {
		t.Fatal(err)
	}
	without, err := run(&polled, false)
	if err != nil {
		t.Fatal(err)
	}
	if withLine > without/2 {
		t.Fatalf("over %d holders: first in line %v, without a place %v; want the first in line at least twice as quick", holders, withLine, without)
	}
	if lined.calls.Load() != 1 || lined.leaves.Load() != 1 || polled.calls.Load() != 1 {
		t.Fatalf("line taken %d times and left %d times (without a place: taken %d times), want once each",
			lined.calls.Load(), lined.leaves.Load(), polled.calls.Load())
	}

	// A place got as the context ended is left.
	var late place
	ctx, cancel := context.WithCancel(context.Background())
	err = Run(ctx, Spec{
		Queue: NewQueue(Coalesce), Key: "k", Wait: true, Backoff: slow,
		Line: func(context.Context, time.Duration) (func(), bool) {
			cancel()
			time.Sleep(10 * time.Millisecond) // the wait ends before the place is reported
			return func() { late.leaves.Add(1) }, true
		},
		Try: func(context.Context, Turn) (Result, error) { return Result{Remaining: -1, Holder: 1}, nil },
	})
	if !errors.Is(err, context.Canceled) || late.leaves.Load() != 1 {
		t.Fatalf("cut off in line: %v, left %d times, want context.Canceled and once", err, late.leaves.Load())
	}
}
