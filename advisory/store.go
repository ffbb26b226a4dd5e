package advisory

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
)

// store is one dialect's locks: the statements, the order of their
// arguments, how their results are read, how a key names its lock, and
// what the dialect cannot serve. Each store_<dialect>.go file registers
// one; the rest of the package asks the store, never the dialect, so a new
// dialect is a new store file.
type store interface {
	// lockID is key's lock in namespace as the server knows it.
	lockID(namespace, key string) lockID
	// try takes id's lock on h's session without waiting in the server and,
	// only when it is granted, draws the fencing token in the same
	// statement; ok is false when another session holds the lock.
	try(ctx context.Context, h handle, id lockID, m mode) (token int64, ok bool, err error)
	// block takes id's lock on h's session, waiting in the server for up
	// to blockFor, and draws the token once it is granted; ok is false
	// when the wait ran out. The session waits for nothing else: a
	// Locker's waiter session serves one key at a time.
	block(ctx context.Context, h handle, id lockID, m mode) (token int64, ok bool, err error)
	// backendID is the statement that returns the session's server-side
	// id, and interrupt the one that ends the running statement of the
	// session with that id, from another session.
	backendID() string
	interrupt(id int64) string
	// unlock frees id's lock on h's session; held is false when the
	// session did not hold it.
	unlock(ctx context.Context, h handle, id lockID, m mode) (held bool, err error)
	// unlockAll frees every lock of h's session.
	unlockAll(ctx context.Context, h handle) error
	// acquireTx takes id's lock for the life of h's transaction, waiting in
	// the server when wait is set, and draws the token once it is granted.
	acquireTx(ctx context.Context, h handle, id lockID, wait bool) (token int64, ok bool, err error)
	// supports is nil when the store serves f, and otherwise an error
	// matching sqllock.ErrUnsupported that says why.
	supports(f feature) error
	// prepare reports whether statements on a pinned session are worth
	// preparing once per connection.
	prepare() bool
}

// blockFor bounds one waiting statement where the server takes a bound
// (GET_LOCK's timeout, whole seconds); the waiter then looks at its
// context and asks again. So a wait whose interrupts all missed (no
// connection to send them from) ends within blockFor of its cancel, and
// a waiting Acquire sends one statement a second. PostgreSQL's waits have
// no bound (see the package doc).
const blockFor = time.Second

// feature is a form of lock not every dialect has.
type feature uint8

const (
	featShared feature = iota + 1 // shared (read) mode
	featTx                        // transaction-level locks (AcquireTx)
)

// handle runs one statement and scans the one column of its one row into
// dest: a pinned session or the caller's transaction.
type handle interface {
	queryRow(ctx context.Context, query string, args []any, dest any) error
	// high is where the handle keeps what its server session knows of
	// PostgreSQL's tokens (see pgToken), nil where the handle's
	// statements may reach more than one session.
	high() *tokenHigh
}

// txHandle runs statements in the caller's transaction.
type txHandle struct{ tx *sql.Tx }

// high is nil: the caller's transactions may be on any session.
func (txHandle) high() *tokenHigh { return nil }

func (h txHandle) queryRow(ctx context.Context, query string, args []any, dest any) error {
	return h.tx.QueryRowContext(ctx, query, args...).Scan(dest)
}

// lockID is a key's lock as the server knows it.
type lockID struct {
	args []any  // the statements' arguments: an advisory lock id, a lock name
	wake string // process-wide wake-up key, distinct across dialects
	hash uint64 // spreads keys over a Locker's sessions
	slot int    // which of the Locker's sessions holds it (set by the Locker)
}

// stores are the dialects this package serves, by dialect; each store file
// adds its own at init.
var stores = map[sqllock.Dialect]store{}

func register(d sqllock.Dialect, s store) { stores[d] = s }

// queryToken runs a statement that returns the fencing token when the lock
// was granted and NULL when it was refused.
func queryToken(ctx context.Context, h handle, query string, args []any) (token int64, ok bool, err error) {
	var tok sql.NullInt64
	err = h.queryRow(ctx, query, args, &tok)
	return tok.Int64, tok.Valid, err
}

// queryHeld runs an unlock statement that returns true (or 1) when the
// session held the lock.
func queryHeld(ctx context.Context, h handle, query string, args []any) (bool, error) {
	var held sql.NullBool
	err := h.queryRow(ctx, query, args, &held)
	return held.Valid && held.Bool, err
}

// noTokenStore serves WithoutToken: st's statements with their token
// expression replaced by 0, so a granted lock returns token 0 and no
// sequence is drawn.
type noTokenStore struct{ store }

func (s noTokenStore) try(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	return s.store.try(ctx, noTokenHandle{h}, id, m)
}

func (s noTokenStore) block(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	return s.store.block(ctx, noTokenHandle{h}, id, m)
}

func (s noTokenStore) acquireTx(ctx context.Context, h handle, id lockID, wait bool) (int64, bool, error) {
	return s.store.acquireTx(ctx, noTokenHandle{h}, id, wait)
}

// noTokenHandle runs h's statements without their token expression.
type noTokenHandle struct{ h handle }

// high is nil: the statements keep the token expression, replaced.
func (noTokenHandle) high() *tokenHigh { return nil }

// tokenExprs are the expressions the stores draw a token with.
var tokenExprs = []string{dialect.PostgresToken, "NEXTVAL(sqllock_fence_seq)"}

// noTokenSQL caches each statement's text without its token.
var noTokenSQL sync.Map

func (n noTokenHandle) queryRow(ctx context.Context, query string, args []any, dest any) error {
	q, ok := noTokenSQL.Load(query)
	if !ok {
		s := query
		for _, e := range tokenExprs {
			s = strings.ReplaceAll(s, e, "0")
		}
		q, _ = noTokenSQL.LoadOrStore(query, s)
	}
	return n.h.queryRow(ctx, q.(string), args, dest)
}
