package waiting

import "sync"

// Mode says what one Signal stands for.
type Mode uint8

const (
	// Coalesce: a Signal says "look again". It wakes the head of the key's
	// queue, and is dropped while a waiter of the key holds a wake-up it has
	// not rearmed: one try settles what several releases announce. A
	// wake-up that arrives during the try that takes the key is passed on
	// too, since that try may not have seen it.
	Coalesce Mode = iota
	// PerRelease: a Signal stands for one release, and wakes the first
	// waiter not already woken, so n releases wake n waiters (shared
	// holders can all win). A waiter that takes the key keeps its wake-up.
	PerRelease
)

// Queue holds the waiters of every key. It is safe for concurrent use.
type Queue struct {
	mode Mode
	mu   sync.Mutex
	m    map[string][]*Waiter
}

// Waiter is one blocked Acquire's place in a key's queue. Only the Acquire
// that joined uses it.
type Waiter struct {
	ch    chan struct{}
	woken bool // ch is closed and the waiter has not rearmed since
}

// NewQueue returns an empty Queue.
func NewQueue(mode Mode) *Queue {
	return &Queue{mode: mode, m: make(map[string][]*Waiter)}
}

// Join queues a waiter for key and reports whether others were queued
// ahead of it.
func (q *Queue) Join(key string) (w *Waiter, ahead bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w = &Waiter{ch: make(chan struct{})}
	ahead = len(q.m[key]) > 0
	q.m[key] = append(q.m[key], w)
	return w, ahead
}

// Rearm is called before each try: it returns the channel the next wake-up
// closes, and whether a wake-up arrived since the last Rearm. A nil w gets
// a nil channel.
func (q *Queue) Rearm(w *Waiter) (wake <-chan struct{}, woken bool) {
	if w == nil {
		return nil, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !w.woken {
		return w.ch, false
	}
	w.woken = false
	w.ch = make(chan struct{})
	return w.ch, true
}

// First reports whether w heads key's queue; a nil w does.
func (q *Queue) First(key string, w *Waiter) bool {
	if w == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.m[key]
	return len(s) > 0 && s[0] == w
}

// Leave dequeues w (a nil w is a no-op). Unless it took the key (acquired), a
// wake-up it has not acted on goes to the next waiter: one that arrived
// since its last Rearm, or, with unspent, the one Rearm last reported,
// which no completed try has settled. Having taken the key, it passes on
// only a wake-up that arrived during the winning try, and only in Coalesce
// mode.
func (q *Queue) Leave(key string, w *Waiter, acquired, unspent bool) {
	if w == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.m[key]
	for i, x := range s {
		if x == w {
			s = append(s[:i:i], s[i+1:]...)
			break
		}
	}
	if len(s) == 0 {
		delete(q.m, key)
	} else {
		q.m[key] = s
	}
	pass := !acquired && (w.woken || unspent)
	if acquired && w.woken && q.mode == Coalesce {
		pass = true
	}
	if pass {
		q.wakeLocked(key)
	}
}

// Signal wakes one waiter of key, as the Mode says, and reports whether
// key had waiters.
func (q *Queue) Signal(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wakeLocked(key)
	return len(q.m[key]) > 0
}

// Waiting reports whether key has waiters.
func (q *Queue) Waiting(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.m[key]) > 0
}

// SignalAll signals every key that has waiters.
func (q *Queue) SignalAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k := range q.m {
		q.wakeLocked(k)
	}
}

// wakeLocked wakes the first waiter of key not already woken. In Coalesce
// mode that is the head, and none while a waiter holds a wake-up it has not
// acted on. The head may be mid-try: then it tries again, since its try may
// have read the key before the release. q.mu held.
func (q *Queue) wakeLocked(key string) {
	s := q.m[key]
	if q.mode == Coalesce {
		for _, x := range s {
			if x.woken {
				return
			}
		}
	}
	for _, x := range s {
		if !x.woken {
			x.woken = true
			close(x.ch)
			return
		}
	}
}
