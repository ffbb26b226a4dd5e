package optimistic

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache prepares each statement once per *sql.DB; database/sql then
// prepares it once per pooled connection, so MySQL does not pay a
// server-side prepare on every call. Other handles (transactions, pinned
// connections, sqlx wrappers) run the text directly: their statements die
// with them.
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

func (c *stmtCache) exec(ctx context.Context, e Execer, q string, args ...any) (sql.Result, error) {
	if db, ok := e.(*sql.DB); ok {
		st, err := c.get(ctx, db, q)
		if err != nil {
			return nil, err
		}
		return st.ExecContext(ctx, args...)
	}
	return e.ExecContext(ctx, q, args...)
}

func (c *stmtCache) queryRow(ctx context.Context, e Querier, q string, args ...any) *sql.Row {
	if db, ok := e.(*sql.DB); ok {
		if st, err := c.get(ctx, db, q); err == nil {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return e.QueryRowContext(ctx, q, args...)
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
