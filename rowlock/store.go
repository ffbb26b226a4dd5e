package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sessionwatch"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

// flavor is what the package knows of one database: how it quotes names
// and numbers placeholders (for LockRows), the DDL of the lock table (for
// Schema), and the store a Locker runs on it. Each store_<dialect>.go file
// registers one; the rest of the package asks it, never the dialect, so a
// new dialect is a new store file.
type flavor interface {
	// quote validates name as a (schema-qualified) identifier and quotes it.
	quote(name string) (string, error)
	// placeholder is the i-th bind parameter of a statement, from 1.
	placeholder(i int) string
	// schema is the DDL of a lock table; t is quoted.
	schema(t string) string
	// tokenQuery draws one fencing token from the shared sequence (for
	// Token).
	tokenQuery() string
	// newStore returns the store of one Locker on its lock table t, quoted.
	newStore(t string, env storeEnv) store
}

// storeEnv is what a store gets from its Locker.
type storeEnv struct {
	db    *sql.DB
	stmts *stmtcache.Cache
	// bg counts the store's background work (MariaDB's kill of a cancelled
	// wait), which Close waits for. Add only while an attempt is in flight,
	// which has added itself already.
	bg *sync.WaitGroup
}

// store is one dialect's row locks for one Locker: the statements, the
// order of their arguments and how their results are read, how a wait
// blocked in the server is stopped when its context ends, and how the
// monitor tells a live hold from a dead one.
type store interface {
	// queries are the statements an attempt runs prepared, in the order
	// lock receives them. The Locker prepares them before it pins a
	// connection: preparing takes a pooled connection of its own, which a
	// small pool may not have while the attempt holds one.
	queries() []string
	// session reads what the store needs of the pinned connection before
	// the attempt's transaction begins: at least its session id (for
	// gone), and the whole holder if the lock statement cannot return it.
	session(ctx context.Context, conn *sql.Conn) (holder, error)
	// lock takes key's row lock in a.tx (a shared one if a.shared), waiting in the server's lock queue
	// when wait is set, and otherwise failing at once with errRefused when
	// another transaction holds it. The token is drawn after the lock is
	// granted, in the transaction that holds it. retry reports that the row
	// was missing and has been created since: the Locker tries again. When
	// ctx ends during the wait, the wait ends on the server too, and the
	// Locker discards the connection, which a late cancel may still hit.
	lock(ctx context.Context, a *attempt, key string, wait bool) (g grant, retry bool, err error)
	// alive reports for each of held whether its hold is still there, in
	// one query whatever their number (see the package doc, Loss).
	alive(ctx context.Context, held []holder) ([]bool, error)
	// gone reports whether none of sessions (as session returned them) is
	// left on the server: Close waits for the sessions it discarded.
	gone(ctx context.Context, sessions []holder) (bool, error)
}

// holder tells one hold of a row lock from every other: the session's id
// (pg_backend_pid(), CONNECTION_ID()) and its life, which tells this hold
// from others under the same session id, as pids and MariaDB connection
// ids are reused: the transaction's xid on PostgreSQL, the server's start
// on MariaDB.
type holder struct{ session, life int64 }

// grant is what a granted lock statement returns.
type grant struct {
	token int64
	holder
}

// joinSessions lists the session ids of hs, comma-separated: one bound
// parameter, whatever their number.
func joinSessions(hs []holder) string {
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = strconv.FormatInt(h.session, 10)
	}
	return strings.Join(ids, ",")
}

// sessionCache holds, per pooled connection, what store.session read of
// it: a connection keeps its session, so it is read once, by its first
// attempt.
type sessionCache struct {
	mu sync.Mutex
	m  map[any]holder // by driver connection
}

// maxSessions bounds a sessionCache: entries of closed connections are
// dropped wholesale when it fills.
const maxSessions = 1024

// get returns conn's entry, calling read to fill it the first time.
func (c *sessionCache) get(conn *sql.Conn, read func() (holder, error)) (holder, error) {
	var dc any
	_ = conn.Raw(func(d any) error { dc = d; return nil })
	c.mu.Lock()
	h, ok := c.m[dc]
	c.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := read()
	if err != nil {
		return holder{}, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSessions {
		c.m = make(map[any]holder)
	}
	c.m[dc] = h
	c.mu.Unlock()
	return h, nil
}

// errRefused marks a NOWAIT refusal inside the package.
var errRefused = errors.New("refused")

// attempt is the pinned connection and the transaction of one try for a
// key; the transaction becomes the lease's if the lock is granted.
type attempt struct {
	conn    *sql.Conn
	tx      *sql.Tx
	cancel  context.CancelFunc  // ends the transaction's context
	stmts   []*sql.Stmt         // store.queries(), prepared; nil to run them unprepared
	queries []string            // store.queries()
	holder  holder              // from store.session
	watch   *sessionwatch.Watch // reports the server closing conn
	shared  bool                // a shared (FOR SHARE) lock, not FOR UPDATE
}

// stmt returns the i-th of store.queries() for use in the transaction.
func (a *attempt) stmt(ctx context.Context, i int) rowQuerier {
	if a.stmts == nil {
		return txText{a.tx, a.queries[i]}
	}
	return a.tx.StmtContext(ctx, a.stmts[i])
}

// rowQuerier runs a statement that returns one row: a prepared statement
// in the transaction, or its text (txText).
type rowQuerier interface {
	QueryRowContext(ctx context.Context, args ...any) *sql.Row
}

// txText runs a query's text, unprepared, in the transaction: for
// WithTransactionPooler.
type txText struct {
	tx *sql.Tx
	q  string
}

func (t txText) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.q, args...)
}

// dialects are the databases this package serves; each store file adds
// its own at init. unsupported says why a known dialect is not served.
var (
	dialects    = map[sqllock.Dialect]flavor{}
	unsupported = map[sqllock.Dialect]string{}
)

func register(d sqllock.Dialect, dl flavor) { dialects[d] = dl }

// dialectOf returns d's dialect, or an error that says why there is none:
// ErrUnsupported for a dialect this package does not serve, ErrInvalidOption
// for one that does not exist. op prefixes the message.
func dialectOf(d sqllock.Dialect, op string) (flavor, error) {
	if dl, ok := dialects[d]; ok {
		return dl, nil
	}
	if why, ok := unsupported[d]; ok {
		return nil, fmt.Errorf("%s%w: %s", op, sqllock.ErrUnsupported, why)
	}
	if d.Valid() {
		return nil, fmt.Errorf("%s%w: no row locks on %v", op, sqllock.ErrUnsupported, d)
	}
	return nil, fmt.Errorf("%s%w: unknown dialect %v", op, sqllock.ErrInvalidOption, d)
}
