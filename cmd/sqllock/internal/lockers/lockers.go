// Package lockers builds the Lockers of sqllock's demos and bench, one
// constructor per strategy, so that both commands lock alike.
package lockers

import (
	"context"
	"database/sql"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// New is a constructor: a Locker over db and its closer, made as o says.
type New func(db *sql.DB, d sqllock.Dialect, o Opts) (sqllock.Locker, func(), error)

// Opts is how the commands' Lockers are made.
type Opts struct {
	// Pooler: made for a transaction-pooling proxy (nil error only when
	// the Locker serves one).
	Pooler bool
	// SingleWriter: every lock statement reaches one Galera node (the
	// strategies' WithSingleWriter).
	SingleWriter bool
}

// Tablelock returns a tablelock Locker.
func Tablelock(db *sql.DB, d sqllock.Dialect, o Opts) (sqllock.Locker, func(), error) {
	return build(db, d, tablelock.New, o, tablelock.WithTransactionPooler, tablelock.WithSingleWriter)
}

// Rowlock returns a rowlock Locker.
func Rowlock(db *sql.DB, d sqllock.Dialect, o Opts) (sqllock.Locker, func(), error) {
	return build(db, d, rowlock.New, o, rowlock.WithTransactionPooler, rowlock.WithSingleWriter)
}

// Advisory returns an advisory Locker. Made for a pooler, it locks only
// in a transaction: its users take it through DoTx or AcquireTx.
func Advisory(db *sql.DB, d sqllock.Dialect, o Opts) (sqllock.Locker, func(), error) {
	return build(db, d, advisory.New, o, advisory.WithTransactionPooler, advisory.WithSingleWriter)
}

// build makes a Locker with newLocker, with the options forPooler and
// singleWriter give as o says.
func build[O any, L interface {
	sqllock.Locker
	Close() error
}](db *sql.DB, d sqllock.Dialect, newLocker func(*sql.DB, sqllock.Dialect, ...O) (L, error), o Opts, forPooler func() O, singleWriter func(bool) O) (sqllock.Locker, func(), error) {
	opts := []O{singleWriter(o.SingleWriter)}
	if o.Pooler {
		opts = append(opts, forPooler())
	}
	l, err := newLocker(db, d, opts...)
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// CleanupTimeout bounds the statements that drop what a demo or bench made.
const CleanupTimeout = 10 * time.Second

// ForgetRows deletes the rows rowlock made for keys: it keeps one row per
// key ever locked, and the demo's and bench's keys are used once. A key's
// next holder would insert the row again, and its tokens come from the
// shared sequence, so nothing depends on the row staying.
func ForgetRows(ctx context.Context, db *sql.DB, d sqllock.Dialect, keys ...string) {
	q := `DELETE FROM sqllock_rows WHERE lock_key = ?`
	if dialect.Of(d).NumberedParams {
		q = `DELETE FROM sqllock_rows WHERE lock_key = $1`
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	defer cancel()
	for _, k := range keys {
		db.ExecContext(ctx, q, k)
	}
}
