package optimistic

import (
	"context"
	"database/sql"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/sqllock/sqllock"
)

// stmtCache prepares each statement once per *sql.DB (a *sqlx.DB counts as
// the *sql.DB it wraps); database/sql then prepares it once per pooled
// connection, so MySQL does not pay a server-side prepare on every call.
// Other handles (transactions, pinned connections) run the text directly:
// their statements die with them.
type stmtCache struct {
	mu sync.Mutex
	m  map[stmtKey]*sql.Stmt
}

type stmtKey struct {
	db *sql.DB
	q  string
}

func (c *stmtCache) get(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := stmtKey{db, q}
	if st, ok := c.m[k]; ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = make(map[stmtKey]*sql.Stmt)
	}
	c.m[k] = st
	return st, nil
}

// pool is the *sql.DB behind a pool handle, or nil.
func pool(e any) *sql.DB {
	switch db := e.(type) {
	case *sql.DB:
		return db
	case *sqlx.DB:
		return db.DB
	}
	return nil
}

func (c *stmtCache) exec(ctx context.Context, e sqllock.Execer, q string, args ...any) (sql.Result, error) {
	if db := pool(e); db != nil {
		st, err := c.get(ctx, db, q)
		if err != nil {
			return nil, err
		}
		return st.ExecContext(ctx, args...)
	}
	return e.ExecContext(ctx, q, args...)
}

func (c *stmtCache) query(ctx context.Context, e sqllock.Querier, q string, args ...any) (*sql.Rows, error) {
	if db := pool(e); db != nil {
		st, err := c.get(ctx, db, q)
		if err != nil {
			return nil, err
		}
		return st.QueryContext(ctx, args...)
	}
	return e.QueryContext(ctx, q, args...)
}

func (c *stmtCache) queryRow(ctx context.Context, db *sql.DB, q string, args ...any) *sql.Row {
	if st, err := c.get(ctx, db, q); err == nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.QueryRowContext(ctx, q, args...)
}

// close closes every prepared statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.m {
		st.Close()
		delete(c.m, k)
	}
}
