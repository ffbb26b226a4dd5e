package locktable

import (
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// Grants, in fair order (Config.Fair): a waiting fair Locker queues an
// entry per owner in the row, and the release that finds an entry first in
// the queue hands the row straight to it (sql/postgres/release.notify.sql):
// the entry's owner holds it, under a new token, for the entry's claim window
// (the lease an entry carries; tablelock.WithClaimWindow). The release
// calls the entry's Locker with the token, and the waiter holds the row
// as granted, without a statement, where a take of its own that found its
// entry queued was sent recently enough (Grant.QueuedAt): that take came
// before the grant, so the grant's window ends no earlier than the take's
// send time plus the window, on the waiter's clock, and the grant's
// commit is durable (a release that grants waits for its WAL flush). The
// waiter's renewal then extends the row to its TTL. A waiter queued
// longer claims the row with a take (accept), which extends it to the
// waiter's TTL and clears called. Either way no one cuts in line, and a
// grantee that is gone (crashed, closed, given up) holds the key for the
// window only, after which the row is free to anyone, and the two entries
// queued next, which heard a copy of the grant, look. No copy goes to the
// grantee's own Locker: heard there after its waiter took the grant
// without a statement, it would be voided under the waiter.
//
// Two ways to learn of a grant, and each ends in the same claim:
//   - the call, heard by the Locker's Listener and handed to the waiter's
//     Grant slot, which wakes the waiter;
//   - a take of the waiter's own (after a reconnection, a wake-up of this
//     process, or its bounded wait), which finds the row granted to its
//     entry under a token above the holder it last saw.
//
// A grant that reaches a Listener with no waiter for it is voided at once:
// given back like a release, which grants the row to the next entry. A
// voiding names the grant's token, or one above the tokens its caller has
// seen or holds: an earlier grant to the same entry (one owner's waiters
// in one Locker share it) may still be in use.

// Entry is a fair waiter's place in a row's queue, kept there as a
// sqllock_waiter (migration 00016): the Table's id, whom a release that
// grants the row calls; the lease a grant gives (the claim window); and
// the owner and host the granted row names. A Locker queued to be called
// only has a zero Window, an empty Owner and Host.
type Entry struct {
	Caller      string
	Window      time.Duration
	Owner, Host string
}

// newEntry is the entry of owner's waiter in the Table id, whose grant
// holds the key for window; ok is false when the window is not a positive
// number of microseconds.
func newEntry(id, owner, host string, window time.Duration) (Entry, bool) {
	if micros(window) <= 0 {
		return Entry{}, false
	}
	return Entry{Caller: id, Window: window.Truncate(time.Microsecond), Owner: owner, Host: host}, true
}

// grantPayload is the JSON of a call that granted a key to an entry
// (sql/postgres/release.notify.sql), after its leading "g": the entry is a
// sqllock_waiter as PostgreSQL's to_json writes it.
type grantPayload struct {
	Token int64 `json:"token"`
	Entry struct {
		Caller  string `json:"caller"`
		ClaimUS int64  `json:"claim_us"`
		Owner   string `json:"owner"`
		Host    string `json:"host"`
	} `json:"entry"`
	Key string `json:"key"`
}

// parseGrant reads the payload of a call that granted a key to an entry:
// "g" and grantPayload.
func parseGrant(payload string) (n notice, ok bool) {
	var p grantPayload
	if !strings.HasPrefix(payload, "g") || json.Unmarshal([]byte(payload[1:]), &p) != nil {
		return notice{}, false
	}
	if p.Token <= 0 || p.Entry.ClaimUS <= 0 || len(p.Entry.Caller) != callerLen {
		return notice{}, false
	}
	e := Entry{Caller: p.Entry.Caller, Window: time.Duration(p.Entry.ClaimUS) * time.Microsecond, Owner: p.Entry.Owner, Host: p.Entry.Host}
	return notice{key: p.Key, callee: e.Caller, grant: true, owner: e.Owner, entry: e, token: p.Token, ttl: e.Window}, true
}

// Grant is the slot of one waiting fair Acquire (Listener.Expect): the
// Listener hands it the token of a grant of its key to its entry.
type Grant struct {
	// Entry is the waiter's place in the row's queue (Claim.Entry).
	Entry Entry
	key   string
	owner string
	wake  chan struct{}

	mu     sync.Mutex
	token  int64     // a grant heard and not yet claimed; 0 when none
	queued bool      // a take found Entry queued
	above  int64     // the holder's token the last such take saw
	sent   time.Time // when that take was sent
}

// Wake receives a value when a grant arrives; nil for a nil g.
func (g *Grant) Wake() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.wake
}

// Queued records a take, sent at sent, that was refused by a holder
// under token and found the entry queued: a grant to the entry comes
// after it.
func (g *Grant) Queued(token int64, sent time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queued, g.above, g.sent = true, token, sent
}

// QueuedAt is when the last take that found the entry queued was sent,
// the zero time before any: a grant to the entry under a token above
// Above was made after it, and holds the key until that time plus the
// claim window at least.
func (g *Grant) QueuedAt() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sent
}

// Above is the holder's token the last take that found the entry queued
// saw, or -1 before any (Claim.Above): only a grant, later, has a larger
// token.
func (g *Grant) Above() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.queued {
		return -1
	}
	return g.above
}

// Take returns the token of a grant heard and not yet claimed, 0 when
// none: the waiter's next take claims it (Claim.Accept).
func (g *Grant) Take() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	token := g.token
	g.token = 0
	return token
}

func (g *Grant) deliver(token int64) {
	g.mu.Lock()
	g.token = token
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Expect returns the slot of owner's waiter of key, whose entry its takes
// queue (Claim.Entry), and a grant to which holds the key for ttl (the
// claim window), or nil when another waiter of the owner expects the
// key in this Locker (it waits without an entry) or the entry cannot be
// made. End it with Unexpect.
func (ln *Listener) Expect(key, owner, host string, ttl time.Duration) *Grant {
	e, ok := newEntry(ln.id, owner, host, ttl)
	if !ok {
		return nil
	}
	ln.wmu.Lock()
	defer ln.wmu.Unlock()
	id := grantID(key, owner)
	if ln.grants[id] != nil {
		return nil
	}
	if ln.grants == nil {
		ln.grants = make(map[string]*Grant)
	}
	g := &Grant{Entry: e, key: key, owner: owner, wake: make(chan struct{}, 1)}
	ln.grants[id] = g
	return g
}

// Unexpect ends g: a call heard later is voided.
func (ln *Listener) Unexpect(g *Grant) {
	ln.wmu.Lock()
	defer ln.wmu.Unlock()
	id := grantID(g.key, g.owner)
	if ln.grants[id] == g {
		delete(ln.grants, id)
	}
}

// grantID is the Listener's name for the slot of owner's waiter of key.
func grantID(key, owner string) string { return key + "\x00" + owner }

// heardGrant hands a grant to the slot expecting it, and reports false; or
// true when none does, and the grant is to be voided.
func (ln *Listener) heardGrant(n notice) bool {
	ln.wmu.Lock()
	defer ln.wmu.Unlock()
	g := ln.grants[grantID(n.key, n.owner)]
	if g == nil || g.Entry != n.entry {
		return true
	}
	if t := ln.graces[n.key]; t != nil {
		// The grant of an earlier copy has nothing left to do.
		t.Stop()
		delete(ln.graces, n.key)
	}
	g.deliver(n.token)
	return false
}
