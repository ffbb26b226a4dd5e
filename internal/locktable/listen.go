package locktable

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/waiting"
)

// listenLinger keeps the listening session open this long after the last
// waiter leaves, so bursts of contention do not pay a LISTEN each.
const listenLinger = 2 * time.Second

// ErrCannotListen: the driver behind the *sql.DB cannot receive
// announcements, so waiters poll.
var ErrCannotListen = errors.New("locktable: the driver cannot listen for releases")

// callGrace is how long the two Lockers queued next after the one a
// release called (they hear a copy of the call) wait for that one to take
// the key, counted from the last call they heard for the key, before they
// look themselves: the called one may have stopped waiting, or died,
// since it queued.
const callGrace = 50 * time.Millisecond

// callerLen is the length of a Table's id, which starts a call's payload.
const callerLen = 16

// notice is one announcement heard: key was freed, and callee, when set,
// is the id of the one Table the release called. A grant (parseGrant)
// gave key to owner's entry of that Table, under token, for ttl.
type notice struct {
	key, callee string
	grant       bool
	owner       string
	entry       Entry
	token       int64
	ttl         time.Duration // the grant's lease
}

// notifier is a store whose dialect announces freed keys to other
// sessions (PostgreSQL NOTIFY).
type notifier interface {
	// listen holds one session of db listening to the table's
	// announcements and calls, calls onReady once it listens, and heard
	// with each, until ctx ends or the session fails; when heard returns
	// true it announces the notice's key to every listener. It returns
	// ErrCannotListen when the driver cannot.
	listen(ctx context.Context, db *sql.DB, id string, onReady func(), heard func(notice) bool) error
	listenChannel() string
}

// Listener wakes the waiters of a queue when a key of the table is freed
// by another session: one session per Listener listens while any waiter
// is subscribed.
type Listener struct {
	db  *sql.DB
	n   notifier
	w   *waiting.Queue
	log *slog.Logger
	id  string // the Table's, whom releases call

	mu     sync.Mutex
	users  int
	ready  chan struct{} // closed once listening (or failed)
	err    error         // why the last start failed
	cancel context.CancelFunc
	exited chan struct{}
	linger *time.Timer
	closed bool
	broken bool // the driver cannot listen: stop trying

	wmu      sync.Mutex
	watchers map[string]map[*watcher]struct{} // by payload
	graces   map[string]*time.Timer           // by key: callGrace after another was called
	grants   map[string]*Grant                // by key and owner: fair waiters (Expect)

	beforeRelisten func() // tests: runs before each reconnection's LISTEN
}

// Listener returns a Listener that signals q with every key of the table
// another session frees, or nil where the dialect announces nothing or
// the Table was opened without Config.Notify: then waiters poll.
func (t *Table) Listener(q *waiting.Queue, log *slog.Logger) *Listener {
	n, ok := t.st.(notifier)
	if !ok || !t.cfg.Notify {
		return nil
	}
	return &Listener{db: t.h.DB, n: n, w: q, log: log, id: t.id}
}

// watcher is one Watch: a wake-up slot of one.
type watcher struct{ ch chan struct{} }

func (w *watcher) wake() {
	select {
	case w.ch <- struct{}{}:
	default: // a wake-up is pending already: one look settles both
	}
}

// Watch keeps the session listening, as Subscribe does, and returns a
// channel that receives a wake-up each time payload is announced on the
// table's channel, and each time the session is back after a failure
// (announcements in between went unheard). Wake-ups coalesce: one pending
// stands for any number. Unlike a waiter's, every watcher of a payload is
// woken. stop ends the watch; after an error there is nothing to stop and
// the caller must poll.
func (ln *Listener) Watch(ctx context.Context, payload string) (wake <-chan struct{}, stop func(), err error) {
	w := &watcher{ch: make(chan struct{}, 1)}
	ln.wmu.Lock()
	if ln.watchers == nil {
		ln.watchers = make(map[string]map[*watcher]struct{})
	}
	if ln.watchers[payload] == nil {
		ln.watchers[payload] = make(map[*watcher]struct{})
	}
	ln.watchers[payload][w] = struct{}{}
	ln.wmu.Unlock()
	remove := func() {
		ln.wmu.Lock()
		defer ln.wmu.Unlock()
		delete(ln.watchers[payload], w)
		if len(ln.watchers[payload]) == 0 {
			delete(ln.watchers, payload)
		}
	}
	if err := ln.Subscribe(ctx); err != nil {
		remove()
		return nil, nil, err
	}
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			remove()
			ln.Unsubscribe()
		})
	}, nil
}

// heard wakes the waiters and the watchers of a notice's key, and reports
// whether to announce the key to every listener: this Locker was called
// but has no waiter left for the key. The waiters of a key another Locker
// was called for (a copy of the call: this Locker is queued one or two
// places after it) look after callGrace, unless that Locker has taken the
// key and a later call is heard by then. A grant goes to its waiter's
// slot (heardGrant); a copy of a grant to another Locker makes the waiters
// here look when the grant's lease ends, unless a later call is heard by
// then: the grantee may be gone.
func (ln *Listener) heard(n notice) (pass bool) {
	if n.grant && n.callee == ln.id {
		return ln.heardGrant(n)
	}
	ln.wmu.Lock()
	defer ln.wmu.Unlock()
	if n.grant {
		ln.lookAfter(n.key, n.ttl+time.Millisecond)
		return false
	}
	for w := range ln.watchers[n.key] {
		w.wake()
	}
	if n.callee != "" && n.callee != ln.id {
		ln.lookAfter(n.key, callGrace)
		return false
	}
	if t := ln.graces[n.key]; t != nil && n.callee != "" {
		// Called itself: the grace of an earlier copy has nothing left to do.
		t.Stop()
		delete(ln.graces, n.key)
	}
	woke := ln.w.Signal(n.key)
	return n.callee != "" && !woke
}

// lookAfter wakes a waiter of key after d, if any waits, unless a later
// copy of a call or grant for key resets the time. ln.wmu held.
func (ln *Listener) lookAfter(key string, d time.Duration) {
	if !ln.w.Waiting(key) {
		return
	}
	if t := ln.graces[key]; t != nil {
		t.Reset(d)
		return
	}
	if ln.graces == nil {
		ln.graces = make(map[string]*time.Timer)
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		ln.wmu.Lock()
		if ln.graces[key] == t {
			delete(ln.graces, key)
		}
		ln.wmu.Unlock()
		ln.w.Signal(key)
	})
	ln.graces[key] = t
}

// wakeAll lets every waiter and watcher look again: announcements may
// have gone unheard.
func (ln *Listener) wakeAll() {
	ln.w.SignalAll()
	ln.wmu.Lock()
	defer ln.wmu.Unlock()
	for _, ws := range ln.watchers {
		for w := range ws {
			w.wake()
		}
	}
}

// SetBeforeRelisten makes ln call f each time it has lost its session and
// is about to listen again. For tests.
func (ln *Listener) SetBeforeRelisten(f func()) { ln.beforeRelisten = f }

// Subscribe registers a waiter and returns once the table's announcements
// are being listened to. After an error the waiter is not registered and
// must poll.
func (ln *Listener) Subscribe(ctx context.Context) error {
	ln.mu.Lock()
	if ln.closed || ln.broken {
		ln.mu.Unlock()
		return ErrCannotListen
	}
	ln.users++
	if ln.linger != nil {
		ln.linger.Stop()
		ln.linger = nil
	}
	if ln.cancel == nil {
		ln.start()
	}
	ready := ln.ready
	ln.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		ln.Unsubscribe()
		return ctx.Err()
	}
	ln.mu.Lock()
	err := ln.err
	ln.mu.Unlock()
	if err != nil {
		ln.Unsubscribe()
	}
	return err
}

// Unsubscribe ends a Subscribe that returned nil.
func (ln *Listener) Unsubscribe() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.users--
	if ln.users == 0 && ln.cancel != nil && ln.linger == nil {
		ln.linger = time.AfterFunc(listenLinger, func() {
			ln.mu.Lock()
			defer ln.mu.Unlock()
			if ln.users == 0 && ln.linger != nil {
				ln.linger = nil
				ln.stopLocked()
			}
		})
	}
}

// Close stops listening and waits for the listening goroutine to exit.
func (ln *Listener) Close() {
	ln.mu.Lock()
	ln.closed = true
	if ln.linger != nil {
		ln.linger.Stop()
		ln.linger = nil
	}
	exited := ln.exited
	ln.stopLocked()
	ln.mu.Unlock()
	ln.wmu.Lock()
	for key, t := range ln.graces {
		t.Stop()
		delete(ln.graces, key)
	}
	ln.wmu.Unlock()
	if exited != nil {
		<-exited
	}
}

func (ln *Listener) stopLocked() {
	if ln.cancel != nil {
		ln.cancel()
		ln.cancel = nil
	}
}

// start launches the listening goroutine. ln.mu held.
func (ln *Listener) start() {
	ctx, cancel := context.WithCancel(context.Background())
	ln.cancel = cancel
	ln.ready = make(chan struct{})
	ln.err = nil
	ln.exited = make(chan struct{})
	go ln.run(ctx, ln.ready, ln.exited)
}

func (ln *Listener) run(ctx context.Context, ready, exited chan struct{}) {
	defer close(exited)
	first := true
	e := backoff.Exp{Min: 10 * time.Millisecond, Max: time.Second}
	for ctx.Err() == nil {
		if !first && ln.beforeRelisten != nil {
			ln.beforeRelisten()
		}
		err := ln.n.listen(ctx, ln.db, ln.id, func() {
			if first {
				first = false
				close(ready)
			} else {
				// Listening again. A release announced since the wake-up
				// below, before the session was back, went unheard: let
				// every waiter look again, or it sleeps until its holder's
				// lease would have expired.
				ln.wakeAll()
			}
			e.Reset()
		}, ln.heard)
		if ctx.Err() != nil {
			break
		}
		// Whatever was released before the session failed may have gone
		// unheard: let every waiter look again now.
		ln.wakeAll()
		if errors.Is(err, ErrCannotListen) || first {
			ln.mu.Lock()
			ln.err = err
			if errors.Is(err, ErrCannotListen) {
				ln.broken = true
			}
			ln.cancel = nil
			ln.mu.Unlock()
			if first {
				close(ready)
			}
			return
		}
		ln.log.Info("sqllock: lock table listener reconnecting", "channel", ln.n.listenChannel(), "error", err.Error())
		_ = backoff.Sleep(ctx, e.Advance())
	}
	if first {
		ln.mu.Lock()
		ln.err = context.Canceled
		ln.mu.Unlock()
		close(ready)
	}
}
