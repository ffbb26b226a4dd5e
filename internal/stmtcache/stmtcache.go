// Package stmtcache prepares each statement once per handle, so that MySQL
// does not pay a server-side prepare (and close) on every parameterised
// call; database/sql then prepares it once per pooled connection.
//
// A Cache is closed once, by the Locker that owns it: Close closes every
// statement it prepared. A statement in use when Close is called finishes
// first; a statement asked for after Close is prepared for that one use and
// closed afterwards, so the leases a closed Locker still has to end (a
// release, a last renewal) keep working without keeping server-side
// statements alive.
package stmtcache

import (
	"context"
	"database/sql"
	"sync"
)

// Cache holds prepared statements by handle and query text. The zero value
// is ready to use; it must not be copied after first use.
type Cache struct {
	// Direct runs Exec, Query and QueryRow unprepared, on the handle
	// itself: for a transaction-pooling proxy (PgBouncer before 1.21 in
	// transaction mode), where a statement prepared on one client's turn
	// of a server session is missing on the next turn, or collides with
	// another client's statement of the same name. Set it before first use.
	Direct bool

	mu     sync.Mutex
	m      map[key]*entry
	closed bool
}

// Preparer is a handle statements are prepared on: a *sql.DB (prepared
// once per pooled connection by database/sql) or a pinned *sql.Conn.
type Preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// runner is a Preparer that also runs statements unprepared (*sql.DB,
// *sql.Conn), for Direct.
type runner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type key struct {
	db Preparer
	q  string
}

// entry is one cached statement and how many callers use it now: Close
// leaves a statement in use to the last of them. (Holding a lock across
// the use instead would stall every caller behind one long wait.)
type entry struct {
	st      *sql.Stmt     // nil while the first caller prepares it
	ready   chan struct{} // closed once that prepare is over
	release func()        // what Stmt returns: made once, not per call
	users   int
	gone    bool // removed by Close: the last user closes st
}

// Stmt returns query prepared on db, and a function to call once the
// statement and any rows it returned are no longer used. Use it for a
// statement that runs inside a transaction (tx.StmtContext).
//
// A query is prepared outside the lock, so that a slow prepare does not
// hold up the statements already cached, and once: callers that ask for
// it meanwhile wait for that prepare. (Preparing it twice would leave one
// to close, and closing a statement waits for every connection it was
// prepared on to finish its current call, which may be a wait on a lock
// held by a caller of this cache.)
func (c *Cache) Stmt(ctx context.Context, db Preparer, query string) (*sql.Stmt, func(), error) {
	k := key{db, query}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return oneShot(ctx, db, query)
		}
		e, ok := c.m[k]
		switch {
		case ok && e.st != nil:
			e.users++
			c.mu.Unlock()
			return e.st, e.release, nil
		case ok:
			ready := e.ready
			c.mu.Unlock()
			select {
			case <-ready:
				continue // prepared, failed (then this caller tries), or closed
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		ne := &entry{ready: make(chan struct{})}
		ne.release = func() { c.done(ne) }
		e = ne
		if c.m == nil {
			c.m = make(map[key]*entry)
		}
		c.m[k] = e
		c.mu.Unlock()
		st, err := db.PrepareContext(ctx, query)
		c.mu.Lock()
		close(e.ready)
		switch {
		case err != nil:
			if c.m[k] == e {
				delete(c.m, k)
			}
			c.mu.Unlock()
			return nil, nil, err
		case c.closed:
			// Close removed the entry meanwhile: this one use only.
			c.mu.Unlock()
			return st, func() { _ = st.Close() }, nil
		}
		e.st = st
		e.users++
		c.mu.Unlock()
		return st, e.release, nil
	}
}

func (c *Cache) done(e *entry) {
	c.mu.Lock()
	e.users--
	last := e.gone && e.users == 0
	c.mu.Unlock()
	if last {
		_ = e.st.Close()
	}
}

// oneShot prepares query for a single use after Close.
func oneShot(ctx context.Context, db Preparer, query string) (*sql.Stmt, func(), error) {
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	return st, func() { _ = st.Close() }, nil
}

// Exec runs query with args on db through its prepared statement.
func (c *Cache) Exec(ctx context.Context, db Preparer, query string, args ...any) (sql.Result, error) {
	if r, ok := db.(runner); ok && c.Direct {
		return r.ExecContext(ctx, query, args...)
	}
	st, done, err := c.Stmt(ctx, db, query)
	if err != nil {
		return nil, err
	}
	defer done()
	return st.ExecContext(ctx, args...)
}

// Query runs query with args on db through its prepared statement. The
// rows stay readable after Close: database/sql closes a statement's
// server side only once its rows are closed.
func (c *Cache) Query(ctx context.Context, db Preparer, query string, args ...any) (*sql.Rows, error) {
	if r, ok := db.(runner); ok && c.Direct {
		return r.QueryContext(ctx, query, args...)
	}
	st, done, err := c.Stmt(ctx, db, query)
	if err != nil {
		return nil, err
	}
	defer done()
	return st.QueryContext(ctx, args...)
}

// QueryRow runs query with args on db through its prepared statement and
// scans its one row into dest; it returns sql.ErrNoRows when there is none.
func (c *Cache) QueryRow(ctx context.Context, db Preparer, query string, args []any, dest ...any) error {
	if r, ok := db.(runner); ok && c.Direct {
		return r.QueryRowContext(ctx, query, args...).Scan(dest...)
	}
	st, done, err := c.Stmt(ctx, db, query)
	if err != nil {
		return err
	}
	defer done()
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

// Close closes every cached statement, each once its current users are
// done. Later calls prepare per use. It is idempotent.
func (c *Cache) Close() error {
	c.mu.Lock()
	var idle []*sql.Stmt
	c.closed = true
	for k, e := range c.m {
		e.gone = true
		if e.users == 0 && e.st != nil { // one being prepared is its preparer's
			idle = append(idle, e.st)
		}
		delete(c.m, k)
	}
	c.mu.Unlock()
	for _, st := range idle {
		_ = st.Close()
	}
	return nil
}

// Len is the number of statements cached now.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.m {
		if e.st != nil {
			n++
		}
	}
	return n
}

// StmtAll is Stmt for several statements at once, for a caller that must
// prepare them before it pins a connection: preparing takes a pooled
// connection of its own, which a small pool may not have while one is
// pinned.
func (c *Cache) StmtAll(ctx context.Context, db Preparer, queries ...string) ([]*sql.Stmt, func(), error) {
	sts := make([]*sql.Stmt, 0, len(queries))
	dones := make([]func(), 0, len(queries))
	done := func() {
		for _, d := range dones {
			d()
		}
	}
	for _, q := range queries {
		st, d, err := c.Stmt(ctx, db, q)
		if err != nil {
			done()
			return nil, nil, err
		}
		sts = append(sts, st)
		dones = append(dones, d)
	}
	return sts, done, nil
}
