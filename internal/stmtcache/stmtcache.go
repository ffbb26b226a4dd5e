// Package stmtcache prepares a Locker's statements once and closes them
// when the Locker is done with them.
package stmtcache

import (
	"context"
	"database/sql"
	"sync"
)

// Cache prepares each statement once on a *sql.DB; database/sql then
// prepares it once per pooled connection, so MySQL does not pay a
// server-side prepare on every call. The statements close once the cache is
// closed and none is in use: on MySQL each open one counts toward the
// server-wide max_prepared_stmt_count, after which every prepare on the
// server fails. The zero value is not usable; call New.
type Cache struct {
	db *sql.DB

	mu     sync.Mutex
	m      map[string]*sql.Stmt
	inUse  int // handed out by Get and not yet put back
	closed bool
}

// New returns a cache of statements on db.
func New(db *sql.DB) *Cache { return &Cache{db: db, m: make(map[string]*sql.Stmt)} }

// Get returns query prepared, and put, to call once done with the
// statement (and with any rows or transaction statement made from it).
// After Close it still works, with a statement prepared for this use alone
// that put closes.
func (c *Cache) Get(ctx context.Context, query string) (*sql.Stmt, func(), error) {
	sts, put, err := c.GetAll(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	return sts[0], put, nil
}

// GetAll is Get for several statements at once, for a caller that must
// prepare them before it pins a connection: preparing takes a pooled
// connection of its own, which a small pool may not have while one is
// pinned.
func (c *Cache) GetAll(ctx context.Context, queries ...string) ([]*sql.Stmt, func(), error) {
	sts := make([]*sql.Stmt, len(queries))
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		for i, q := range queries {
			st, err := c.db.PrepareContext(ctx, q)
			if err != nil {
				closeAll(sts[:i])
				return nil, nil, err
			}
			sts[i] = st
		}
		var once sync.Once
		return sts, func() { once.Do(func() { closeAll(sts) }) }, nil
	}
	defer c.mu.Unlock()
	for i, q := range queries {
		st, ok := c.m[q]
		if !ok {
			var err error
			if st, err = c.db.PrepareContext(ctx, q); err != nil {
				return nil, nil, err
			}
			c.m[q] = st
		}
		sts[i] = st
	}
	c.inUse++
	var once sync.Once
	return sts, func() { once.Do(c.put) }, nil
}

func (c *Cache) put() {
	c.mu.Lock()
	c.inUse--
	c.mu.Unlock()
	c.closeIfDone()
}

// Close closes the statements, at once or, if some are in use, when the
// last is put back. Later calls of Get prepare one-use statements. Close
// may be called more than once.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.closeIfDone()
}

func (c *Cache) closeIfDone() {
	c.mu.Lock()
	if !c.closed || c.inUse > 0 || len(c.m) == 0 {
		c.mu.Unlock()
		return
	}
	sts := make([]*sql.Stmt, 0, len(c.m))
	for q, st := range c.m {
		sts = append(sts, st)
		delete(c.m, q)
	}
	c.mu.Unlock()
	closeAll(sts)
}

func closeAll(sts []*sql.Stmt) {
	for _, st := range sts {
		_ = st.Close()
	}
}
