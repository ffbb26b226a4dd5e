package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock"
)

// CountingDB opens t as its own pool whose every statement sent to the
// server (exec, query, prepared or not) is counted in n: the load one
// client puts on the database, whatever else the server runs. On
// PostgreSQL pgx counts them itself (a query tracer), those sent on the
// pgx connection under a database/sql one included: the library runs a
// lease's statements and its LISTEN there. Elsewhere a wrapping driver
// counts them.
func CountingDB(t Target, n *atomic.Int64) (*sql.DB, error) {
	if t.Dialect == sqllock.Postgres {
		cfg, err := pgx.ParseConfig(t.DSN)
		if err != nil {
			return nil, err
		}
		cfg.Tracer = countingTracer{n}
		return stdlib.OpenDB(*cfg), nil
	}
	probe, err := sql.Open(t.Driver, t.DSN)
	if err != nil {
		return nil, err
	}
	drv := probe.Driver()
	probe.Close()
	var base driver.Connector = dsnConnector{drv, t.DSN}
	if dc, ok := drv.(driver.DriverContext); ok {
		if base, err = dc.OpenConnector(t.DSN); err != nil {
			return nil, err
		}
	}
	return sql.OpenDB(countingConnector{base, n}), nil
}

// countingTracer counts each statement pgx sends.
type countingTracer struct{ n *atomic.Int64 }

func (c countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

type countingConnector struct {
	base driver.Connector
	n    *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{dc: conn, n: c.n}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.base.Driver() }

// countingConn forwards every optional interface the drivers here have.
type countingConn struct {
	dc driver.Conn
	n  *atomic.Int64
}

func (c *countingConn) Close() error { return c.dc.Close() }

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := c.dc.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, q)
	} else {
		st, err = c.dc.Prepare(q)
	}
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, n: c.n}, nil
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.n.Add(1)
	if b, ok := c.dc.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return nil, errOldDriver
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.dc.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.n.Add(1)
	return e.ExecContext(ctx, q, args)
}

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := c.dc.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	c.n.Add(1)
	return qc.QueryContext(ctx, q, args)
}

func (c *countingConn) Ping(ctx context.Context) error {
	if p, ok := c.dc.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.dc.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *countingConn) IsValid() bool {
	if v, ok := c.dc.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.dc.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type countingStmt struct {
	driver.Stmt
	n *atomic.Int64
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.n.Add(1)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return nil, errOldDriver
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.n.Add(1)
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return nil, errOldDriver
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// errOldDriver: every driver here has the context forms; an older one is
// not counted rather than counted wrong.
var errOldDriver = errors.New("bench: the driver lacks the context forms of its methods")
