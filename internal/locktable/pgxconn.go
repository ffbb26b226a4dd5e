package locktable

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgxDirect runs the PostgreSQL store's statements of a lease (take,
// renew, release, and fair order's leaving a queue and giving a grant
// back) on the pgx connection under a database/sql one, where the *sql.DB
// is pgx's stdlib: without database/sql's prepared statement
// and its Rows (whose cancellable context costs a goroutine per query), an
// Acquire and its Release cost the client a tenth less CPU. pgx prepares
// and caches each statement per connection itself, as database/sql did;
// those stay prepared on the pooled connections after Close, as pgx's own
// queries do. Other drivers, and a Table that runs its statements
// unprepared for a transaction pooler, go through the handle.
type pgxDirect struct {
	off atomic.Bool // unprepared (Config.Unprepared), or the driver is not pgx's: use the handle
}

// errNotPgx: the connection under database/sql's is not pgx's.
var errNotPgx = errors.New("not a pgx connection")

// maxBadConn is how many times a call runs again on another connection
// when one was found dead before the statement went out, as database/sql
// does.
const maxBadConn = 2

// run runs fn on a pgx connection of h's pool; ok is false when h's driver
// is not pgx's, and fn did not run.
func (p *pgxDirect) run(ctx context.Context, h handle, fn func(*pgx.Conn) error) (ok bool, err error) {
	if p.off.Load() {
		return false, nil
	}
	for try := 0; ; try++ {
		err = p.once(ctx, h.DB, fn)
		if errors.Is(err, errNotPgx) {
			p.off.Store(true)
			return false, nil
		}
		// A connection that died idle in the pool fails before sending
		// anything: safe to run on another.
		if err == nil || try == maxBadConn || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
			return true, err
		}
	}
}

// once runs fn on one pooled connection, which is discarded if fn found it
// dead.
func (p *pgxDirect) once(ctx context.Context, db *sql.DB, fn func(*pgx.Conn) error) error {
	return onPgx(ctx, db, func(c *pgx.Conn) error {
		err := fn(c)
		if pgconn.SafeToRetry(err) {
			// database/sql discards the connection instead of pooling it.
			return errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
}

// onPgx runs fn on the pgx connection under one pooled connection of db;
// errNotPgx when db's driver is not pgx's stdlib.
func onPgx(ctx context.Context, db *sql.DB, fn func(*pgx.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errNotPgx
		}
		return fn(pc.Conn())
	})
}

// queryRow runs q on a pgx connection of h's pool, or through h, and
// scans its one row into dest; sql.ErrNoRows when there is none.
func (p *pgxDirect) queryRow(ctx context.Context, h handle, q string, args []any, dest ...any) error {
	ok, err := p.run(ctx, h, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, q, args...).Scan(dest...)
	})
	if !ok {
		return h.queryRow(ctx, q, args, dest...)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

// exec runs q on a pgx connection of h's pool, or through h, and returns
// the number of rows it changed.
func (p *pgxDirect) exec(ctx context.Context, h handle, q string, args ...any) (int64, error) {
	var n int64
	ok, err := p.run(ctx, h, func(c *pgx.Conn) error {
		tag, err := c.Exec(ctx, q, args...)
		n = tag.RowsAffected()
		return err
	})
	if !ok {
		return h.exec(ctx, q, args...)
	}
	return n, err
}
