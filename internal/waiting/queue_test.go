package waiting

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var modes = []struct {
	name string
	mode Mode
}{{"coalesce", Coalesce}, {"per-release", PerRelease}}

// isWoken reports whether w holds a wake-up, without rearming it.
func isWoken(w *Waiter) bool {
	select {
	case <-w.ch:
		return true
	default:
		return false
	}
}

// wokenSet lists which of ws hold a wake-up.
func wokenSet(ws ...*Waiter) []bool {
	out := make([]bool, len(ws))
	for i, w := range ws {
		out[i] = isWoken(w)
	}
	return out
}

func wantWoken(t *testing.T, ws []*Waiter, want ...bool) {
	t.Helper()
	got := wokenSet(ws...)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("woken %v, want %v", got, want)
		}
	}
}

func TestJoinAheadFirst(t *testing.T) {
	q := NewQueue(Coalesce)
	a, ahead := q.Join("k")
	if ahead {
		t.Error("first waiter sees others ahead")
	}
	b, ahead := q.Join("k")
	if !ahead {
		t.Error("second waiter sees nobody ahead")
	}
	if _, ahead := q.Join("other"); ahead {
		t.Error("keys share a queue")
	}
	if !q.First("k", a) || q.First("k", b) {
		t.Error("First: want a at the head, not b")
	}
	if !q.First("k", nil) {
		t.Error("First(nil) = false")
	}
	q.Leave("k", a, true, false)
	if !q.First("k", b) {
		t.Error("b not at the head after a left")
	}
	q.Leave("k", b, true, false)
	q.Leave("k", nil, false, true) // no-op
	if len(q.m["k"]) != 0 || q.m["k"] != nil {
		t.Errorf("queue left behind: %v", q.m)
	}
	if wake, woken := q.Rearm(nil); wake != nil || woken {
		t.Error("Rearm(nil) returned a channel or a wake-up")
	}
}

// TestFIFO: each release wakes the waiters in arrival order, one at a time,
// in both modes, when each woken waiter takes the key.
func TestFIFO(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			q := NewQueue(m.mode)
			ws := make([]*Waiter, 5)
			for i := range ws {
				ws[i], _ = q.Join("k")
			}
			for i := range ws {
				q.Signal("k")
				want := make([]bool, len(ws)-i) // those still queued
				want[0] = true
				wantWoken(t, ws[i:], want...)
				q.Leave("k", ws[i], true, false)
			}
		})
	}
}

// TestCoalesce: in Coalesce mode, signals before the head has rearmed count
// as one and the others are not woken; a signal during its try is kept, and
// the refused head, still first, is woken again by the next release.
func TestCoalesce(t *testing.T) {
	q := NewQueue(Coalesce)
	a, _ := q.Join("k")
	b, _ := q.Join("k")
	ws := []*Waiter{a, b}
	for range 3 {
		q.Signal("k")
	}
	wantWoken(t, ws, true, false)
	if _, woken := q.Rearm(a); !woken {
		t.Fatal("Rearm: the wake-up was not reported")
	}
	if _, woken := q.Rearm(a); woken {
		t.Fatal("three signals counted as more than one")
	}
	wantWoken(t, ws, false, false)
	// The head is refused and stays first: the next release wakes it, not b.
	q.Signal("k")
	wantWoken(t, ws, true, false)
	// SignalAll wakes the head of each key, coalesced with what it holds.
	c, _ := q.Join("other")
	q.SignalAll()
	wantWoken(t, []*Waiter{a, b, c}, true, false, true)
}

// TestPerRelease: in PerRelease mode n signals wake the first n waiters.
func TestPerRelease(t *testing.T) {
	q := NewQueue(PerRelease)
	ws := make([]*Waiter, 4)
	for i := range ws {
		ws[i], _ = q.Join("k")
	}
	q.Signal("k")
	q.Signal("k")
	wantWoken(t, ws, true, true, false, false)
	q.SignalAll()
	wantWoken(t, ws, true, true, true, false)
}

// TestLeavePassesWake: a waiter that leaves without the key never takes a
// wake-up with it: one that arrived since its Rearm, or the one Rearm
// reported that no try spent. One that takes the key passes on a wake-up
// that arrived during its try in Coalesce mode only.
func TestLeavePassesWake(t *testing.T) {
	cases := []struct {
		name     string
		mode     Mode
		rearm    bool // the head rearms (takes the wake-up) before it leaves
		acquired bool
		unspent  bool
		want     bool // the second waiter is woken
	}{
		{"coalesce/woken, gives up", Coalesce, false, false, false, true},
		{"coalesce/rearmed, unspent, gives up", Coalesce, true, false, true, true},
		{"coalesce/rearmed, spent, gives up", Coalesce, true, false, false, false},
		{"coalesce/woken during the winning try", Coalesce, false, true, false, true},
		{"coalesce/rearmed, wins", Coalesce, true, true, true, false},
		{"per-release/woken, gives up", PerRelease, false, false, false, true},
		{"per-release/rearmed, unspent, gives up", PerRelease, true, false, true, true},
		{"per-release/rearmed, spent, gives up", PerRelease, true, false, false, false},
		{"per-release/woken during the winning try", PerRelease, false, true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := NewQueue(c.mode)
			a, _ := q.Join("k")
			b, _ := q.Join("k")
			q.Signal("k")
			if c.rearm {
				q.Rearm(a)
			}
			q.Leave("k", a, c.acquired, c.unspent)
			if got := isWoken(b); got != c.want {
				t.Errorf("next waiter woken = %v, want %v", got, c.want)
			}
			if !q.First("k", b) {
				t.Error("the next waiter is not at the head")
			}
		})
	}
}

// TestNoLostWakeup: goroutines take turns on one in-memory key using only
// the queue's wake-ups (no polling), while quitters join and leave on short
// deadlines at every point of the loop: woken or not, before or after a
// try. One lost wake-up stalls a worker and fails the test.
func TestNoLostWakeup(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			const (
				workers  = 4
				quitters = 4
				turns    = 300
			)
			q := NewQueue(m.mode)
			var held atomic.Bool
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			// acquire follows the callers' discipline: join before the first
			// try, rearm before each, skip the first when others are queued
			// unless woken, and leave with any unspent wake-up.
			acquire := func(ctx context.Context) bool {
				w, skip := q.Join("k")
				unspent := false
				for {
					wake, woken := q.Rearm(w)
					unspent = unspent || woken
					skip = skip && !woken
					if ctx.Err() != nil {
						q.Leave("k", w, false, unspent)
						return false
					}
					if !skip {
						if rand.N(4) == 0 {
							runtime.Gosched() // let a release land during the try
						}
						if held.CompareAndSwap(false, true) {
							q.Leave("k", w, true, unspent)
							return true
						}
						unspent = false // refused: the holder's release wakes us
					}
					skip = false
					select {
					case <-wake:
					case <-ctx.Done():
						q.Leave("k", w, false, unspent)
						return false
					}
				}
			}
			// hold is the critical section, then the release.
			var inside atomic.Int32
			hold := func() {
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				if rand.N(2) == 0 {
					runtime.Gosched()
				}
				inside.Add(-1)
				held.Store(false)
				q.Signal("k")
			}

			var (
				wg, qg sync.WaitGroup
				stop   atomic.Bool
			)
			for i := range workers {
				wg.Go(func() {
					for n := range turns {
						if !acquire(ctx) {
							t.Errorf("worker %d stalled after %d turns of %d: a wake-up was lost", i, n, turns)
							return
						}
						hold()
					}
				})
			}
			for range quitters {
				qg.Go(func() {
					for !stop.Load() {
						qctx, qcancel := context.WithTimeout(ctx, time.Duration(rand.N(200))*time.Microsecond)
						if acquire(qctx) {
							hold()
						}
						qcancel()
					}
				})
			}
			wg.Wait()
			stop.Store(true)
			qg.Wait()
			if n := len(q.m); n != 0 {
				t.Errorf("%d keys left queued", n)
			}
		})
	}
}

// TestSignalReportsWaiters: Signal and Waiting tell whether a key has
// waiters, so a Locker called for a key it no longer waits for can hand
// the call on; a waiter holding a wake-up it has not acted on still counts.
func TestSignalReportsWaiters(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			q := NewQueue(m.mode)
			if q.Waiting("k") || q.Signal("k") {
				t.Fatal("a key nobody joined has waiters")
			}
			w, _ := q.Join("k")
			if !q.Waiting("k") || !q.Signal("k") || !isWoken(w) {
				t.Fatal("the waiter of k was not reported and woken")
			}
			if !q.Signal("k") {
				t.Fatal("a woken waiter that has not left no longer counts")
			}
			q.Leave("k", w, true, false)
			if q.Waiting("k") || q.Signal("k") {
				t.Fatal("a key whose waiter left still has waiters")
			}
		})
	}
}
