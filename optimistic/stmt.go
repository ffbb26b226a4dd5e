package optimistic

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

// The package's statements on a *sql.DB go through the prepared-statement
// cache of the Locker, Table or Counter that runs them, so MySQL does not
// pay a server-side prepare on every call; a *sqlx.DB counts as the
// *sql.DB it wraps. Other handles (transactions, pinned connections) run
// the text directly: their statements would die with them.

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

// exec runs q on e, through c when e is a pool.
func exec(ctx context.Context, c *stmtcache.Cache, e sqllock.Execer, q string, args ...any) (sql.Result, error) {
	if db := pool(e); db != nil {
		return c.Exec(ctx, db, q, args...)
	}
	return e.ExecContext(ctx, q, args...)
}

// query runs q on e, through c when e is a pool.
func query(ctx context.Context, c *stmtcache.Cache, e sqllock.Querier, q string, args ...any) (*sql.Rows, error) {
	if db := pool(e); db != nil {
		return c.Query(ctx, db, q, args...)
	}
	return e.QueryContext(ctx, q, args...)
}
