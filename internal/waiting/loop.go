package waiting

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
)

// ErrRefused is returned by a non-blocking Run whose try found the key held.
// The caller describes the holder from what its try learnt.
var ErrRefused = errors.New("refused")

// Result is the outcome of one try.
type Result struct {
	Won bool
	// Remaining is how long the holder's claim lasts, when a refused try
	// could tell (a lease expiry); negative when unknown.
	Remaining time.Duration
	// Holder is the holder's fencing token, when a refused try could
	// tell; 0 otherwise.
	Holder int64
}

// Turn tells a try where it stands.
type Turn struct {
	Tries  int  // tries completed before this one
	Woken  bool // a release woke this waiter since its last try: the key is likely free
	Queued bool // the call blocks in the queue (Spec.Wait)
}

// Spec describes one acquisition.
type Spec struct {
	Queue *Queue
	Key   string // the queue's key
	Wait  bool   // block until won; otherwise try once
	// Reentry: the caller holds the key already, so it does not let those
	// queued ahead of it go first.
	Reentry bool
	// Listening: releases in other processes wake this one too, so a
	// refused waiter need not poll for them.
	Listening bool
	// Backoff paces polling for releases this process cannot see.
	Backoff backoff.Exp
	// Closed, when closed, wakes the waiter for a last try: the Locker was
	// closed, and the try reports it.
	Closed <-chan struct{}
	// Try makes one attempt.
	Try func(ctx context.Context, t Turn) (Result, error)
	// Block, when set, waits in the server, up to d, for the holder of
	// the key to let go (a gate: see locktable.Gate), instead of the pause,
	// for the head of the queue when a refused try could tell how long
	// the holder's claim lasts. It reports whether it was let through
	// (got) before d passed; ok is false when it could not block, and the
	// waiter pauses instead. It must return soon after ctx ends, leaving
	// nothing waiting in the server.
	Block func(ctx context.Context, d time.Duration) (got, ok bool)
	// Line, when set, puts the head of this process's waiters for the key
	// in line with those of every process (a line: see
	// locktable.Gate.Line), after its first refusal, and blocks up to d
	// until it is first in line. It returns leave, which Run calls once
	// the waiter took the key or gave up, or nil when d passed or it could
	// not (ok false): the waiter then polls as without a line. It must
	// return soon after ctx ends, leaving nothing waiting in the server.
	Line func(ctx context.Context, d time.Duration) (leave func(), ok bool)
	// Wake, when set, receives when this waiter alone should try again
	// (a grant of the key to it: locktable.Grant); nil never does.
	Wake <-chan struct{}
	// Bound, when positive, ends every wait of a blocked waiter (a pause,
	// a Block) by itself within about Bound, so that a wake-up lost (a
	// notice unheard, a called or granted waiter gone, a gate kept by a
	// holder that lost its key) costs at most Bound, never a lease.
	Bound time.Duration
}

// Run makes tries until one wins (nil), the context ends (ctx.Err()), a
// non-blocking try is refused (ErrRefused) or a try fails for good (its
// error). A transient error ends a non-blocking Run too.
func Run(ctx context.Context, s Spec) error {
	if err := ctxend.Err(ctx); err != nil {
		return err
	}
	var wt *Waiter
	skip := false
	if s.Wait {
		var ahead bool
		wt, ahead = s.Queue.Join(s.Key)
		skip = ahead && !s.Reentry
	}
	// woke: wt took a wake-up and no completed try has settled it.
	woke := false
	// first: the waiter's place at the front of the line, when it has one;
	// lined: it has been in line in this Run (once is enough: a waiter
	// whose line wait ended without its turn polls).
	var first func()
	lined := false
	leave := func(acquired bool) {
		s.Queue.Leave(s.Key, wt, acquired, woke)
		if first != nil {
			first()
		}
	}
	e := s.Backoff
	passed := false  // the last Block got the gate
	var holder int64 // the holder the last refusal named
	for tries := 0; ; {
		wake, got := s.Queue.Rearm(wt)
		woke = woke || got
		skip = skip && !got // woken before its first turn: it is its turn
		r := Result{Remaining: -1}
		var err error
		if skip {
			skip = false
		} else {
			r, err = s.Try(ctx, Turn{Tries: tries, Woken: got, Queued: wt != nil})
			tries++
		}
		switch {
		case err == nil && r.Won:
			leave(true)
			return nil
		case err == nil:
			woke = false // refused: the key is held, and its release wakes us again
		case ctxend.Err(ctx) != nil:
			leave(false)
			return ctxend.Err(ctx)
		case dberr.IsDeadlock(err) || dberr.IsLockNotAvailable(err):
			// The server settled a race for the key against us: held.
			r, woke = Result{Remaining: -1}, false
		case dberr.IsRetryable(err) && s.Wait:
			r = Result{Remaining: -1}
		default:
			leave(false)
			return err
		}
		if !s.Wait {
			return ErrRefused
		}
		head := s.Queue.First(s.Key, wt)
		if s.Line != nil && head && !lined && err == nil && !s.Reentry {
			lined = true
			lv, ended := line(ctx, &s)
			if ended {
				leave(false)
				return ctxend.Err(ctx)
			}
			if lv != nil {
				// First in line: the key goes round the line, so this
				// waiter polls at its quickest while holders change. It
				// waits as it would have without the line: a key freed
				// meanwhile lets it through the gate, or the pause is
				// short.
				first = lv
				e.Reset()
			}
		}
		// A gate got at once and a refusal after it: nobody keeps the
		// gate (its holder's Locker has none, or has not taken it yet), so
		// this round pauses; the next blocks again.
		if s.Block != nil && head && r.Remaining > 0 && !(err == nil && passed) {
			got, ok, ended := block(ctx, &s, wake, bounded(&s, r.Remaining))
			if ended {
				leave(false)
				return ctxend.Err(ctx)
			}
			if ok {
				passed = got
				continue
			}
		}
		passed = false
		if first != nil {
			if r.Holder != 0 && r.Holder != holder {
				e.Reset()
			}
			holder = r.Holder
		} else {
			turned(&e, &holder, r)
		}
		t := time.NewTimer(bounded(&s, pause(&s, &e, r, head)))
		select {
		case <-wake:
		case <-s.Wake:
		case <-t.C:
		case <-s.Closed:
		case <-ctx.Done():
			t.Stop()
			leave(false)
			return ctx.Err()
		}
		t.Stop()
	}
}

// turnCap bounds the backoff of a waiter that saw the key change hands
// (turned). With 8 clients on a hot key and no cap, MariaDB's busiest
// client took 15-23 % of the turns (raw 1 ms pollers 13-14 %), the waiters
// that had backed off longest the fewest; with 16 ms it took 13-17 % at
// the same rate, and with 4 ms the polls cost a fifth of the rate.
const turnCap = 16 * time.Millisecond

// turned caps e at turnCap when a refusal names a holder other than the
// last one (*last): the key turns over faster than e has grown, and a
// waiter that kept backing off would lose each turn to those that polled
// sooner. Such a waiter polls every 8-16 ms while the holders change (a
// raw poller every 1 ms), and backs off as before once one stays.
func turned(e *backoff.Exp, last *int64, r Result) {
	if r.Holder == 0 {
		return
	}
	if *last != 0 && r.Holder != *last {
		e.Cap(turnCap)
	}
	*last = r.Holder
}

// block runs s.Block for up to the holder's remaining claim (plus jitter,
// as the listening pause), ending it early on a wake-up in this process,
// the Locker closing or ctx. ended: ctx ended.
func block(ctx context.Context, s *Spec, wake <-chan struct{}, remaining time.Duration) (got, ok, ended bool) {
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type res struct{ got, ok bool }
	done := make(chan res, 1)
	go func() {
		g, k := s.Block(bctx, remaining+time.Millisecond+rand.N(2*time.Millisecond))
		done <- res{g, k}
	}()
	select {
	case r := <-done:
		return r.got, r.ok, false
	case <-wake:
	case <-s.Wake:
	case <-s.Closed:
	case <-ctx.Done():
	}
	cancel()
	<-done // Block leaves nothing waiting in the server
	if ctxend.Err(ctx) != nil {
		return false, false, true
	}
	return false, true, false
}

// line runs s.Line for up to the bound (a second without one), ending
// it early when the Locker closes or ctx ends (ended: ctx ended). A
// release in this process does not end it: the key goes to the first in
// line.
func line(ctx context.Context, s *Spec) (leave func(), ended bool) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type res struct {
		leave func()
		ok    bool
	}
	done := make(chan res, 1)
	go func() {
		lv, ok := s.Line(lctx, bounded(s, time.Second))
		done <- res{lv, ok}
	}()
	select {
	case r := <-done:
		return r.leave, false
	case <-s.Closed:
	case <-ctx.Done():
	}
	cancel()
	if r := <-done; r.leave != nil {
		r.leave() // got its place as it ended
	}
	return nil, ctxend.Err(ctx) != nil
}

// bounded caps d at s.Bound, less up to a tenth of it at random, so that
// waiters bounded together do not look together.
func bounded(s *Spec, d time.Duration) time.Duration {
	if s.Bound <= 0 || d <= s.Bound {
		return d
	}
	return s.Bound - rand.N(s.Bound/10+1)
}

// pause is how long a refused waiter waits before its next try unless
// woken. head: it heads the key's queue in this process.
func pause(s *Spec, e *backoff.Exp, r Result, head bool) time.Duration {
	if s.Listening && r.Remaining >= 0 {
		// Until the claim ends, in case its holder died without a word;
		// jitter spreads the waiters that all wake at one expiry.
		return r.Remaining + time.Millisecond + rand.N(2*time.Millisecond)
	}
	if s.Listening {
		return 5*time.Millisecond + rand.N(10*time.Millisecond)
	}
	if !head {
		e.AtMax()
	}
	d := e.Advance()
	if r.Remaining >= 0 && r.Remaining < d {
		d = r.Remaining + time.Millisecond
	}
	return backoff.Jitter(d)
}
