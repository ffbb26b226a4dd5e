// Package pgxq lets a pgx-native application hand its own pgx transaction
// (or connection) to the sqllock packages that work inside the caller's
// transaction: fence (Check, Guard, Claim), rowlock.LockRows and
// rowlock.Token, optimistic. Those take a [sqllock.Querier], the
// database/sql vocabulary (ExecContext, QueryContext returning *sql.Rows),
// which a pgx.Tx does not speak.
//
//	tx, err := pool.Begin(ctx) // a pgx.Tx
//	q := pgxq.New(tx)
//	defer q.Close()
//	if err := f.Guard(ctx, q, "invoice/42"); err != nil { ... }
//	_, err = tx.Exec(ctx, "UPDATE invoices ...") // the same transaction
//	err = tx.Commit(ctx)
//
// The statements run on the pgx handle itself, in its transaction; the
// adapter holds no connection of its own and registers no database/sql
// driver. Query results reach the caller as pgx decodes them.
//
// An application that only needs a *sql.DB for the Lockers can also open
// one over its pool with stdlib.OpenDBFromPool (package
// github.com/jackc/pgx/v5/stdlib): every sqllock package then works on it
// as on any *sql.DB, and its connections are the pool's. The pgx
// section of docs/recipes.md says what each strategy takes from the pool.
package pgxq

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock"
)

// Handle is what the adapter runs statements on: pgx.Tx, *pgx.Conn,
// *pgxpool.Conn, *pgxpool.Tx and *pgxpool.Pool all have these methods.
// Use a transaction: a fence check outside one guards nothing after it.
type Handle interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

var _ sqllock.Querier = (*Querier)(nil)

// Querier is a [sqllock.Querier] over a pgx Handle. Like the handle, it
// serves one statement at a time. Close it when done.
type Querier struct {
	db *sql.DB
}

// New returns a Querier that runs its statements on h.
func New(h Handle) *Querier {
	db := sql.OpenDB(connector{h})
	db.SetMaxIdleConns(1)
	return &Querier{db: db}
}

// ExecContext runs a statement on the handle.
func (q *Querier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return q.db.ExecContext(ctx, query, args...)
}

// QueryContext runs a query on the handle. Close the rows before the next
// statement: the handle runs one at a time.
func (q *Querier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.db.QueryContext(ctx, query, args...)
}

// Close releases the adapter. It never ends the handle's transaction nor
// closes the handle: they are the caller's.
func (q *Querier) Close() error { return q.db.Close() }

// connector hands database/sql connections that all run on h.
type connector struct{ h Handle }

func (c connector) Connect(context.Context) (driver.Conn, error) { return &conn{h: c.h}, nil }

func (c connector) Driver() driver.Driver { return drv{} }

// drv exists because driver.Connector must name a Driver; it opens
// nothing by name.
type drv struct{}

func (drv) Open(string) (driver.Conn, error) {
	return nil, errors.New("pgxq: open by name is not supported")
}

// errNoTx: the transaction belongs to the pgx handle.
var errNoTx = errors.New("pgxq: begin, commit and roll back on the pgx handle, not through the adapter")

// conn is one database/sql connection over the handle.
type conn struct{ h Handle }

var (
	_ driver.ExecerContext     = (*conn)(nil)
	_ driver.QueryerContext    = (*conn)(nil)
	_ driver.NamedValueChecker = (*conn)(nil)
)

func (*conn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("pgxq: prepared statements are not supported (pgx caches statements itself)")
}

func (*conn) Close() error { return nil }

func (*conn) Begin() (driver.Tx, error) { return nil, errNoTx }

// CheckNamedValue lets every argument through as it is, for pgx to encode.
func (*conn) CheckNamedValue(*driver.NamedValue) error { return nil }

func values(args []driver.NamedValue) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	tag, err := c.h.Exec(ctx, query, values(args)...)
	if err != nil {
		return nil, err
	}
	return result(tag.RowsAffected()), nil
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.h.Query(ctx, query, values(args)...)
	if err != nil {
		return nil, err
	}
	return &rows{r: r}, nil
}

type result int64

func (result) LastInsertId() (int64, error) {
	return 0, errors.New("pgxq: no LastInsertId on PostgreSQL; use RETURNING")
}

func (r result) RowsAffected() (int64, error) { return int64(r), nil }

// rows reads pgx rows for database/sql.
type rows struct{ r pgx.Rows }

func (r *rows) Columns() []string {
	fds := r.r.FieldDescriptions()
	cols := make([]string, len(fds))
	for i, fd := range fds {
		cols[i] = fd.Name
	}
	return cols
}

func (r *rows) Close() error {
	r.r.Close()
	return r.r.Err()
}

func (r *rows) Next(dest []driver.Value) error {
	if !r.r.Next() {
		if err := r.r.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	vals, err := r.r.Values()
	if err != nil {
		return err
	}
	for i := range dest {
		dest[i] = vals[i]
	}
	return nil
}
