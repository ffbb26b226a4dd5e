package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock"
)

// AcquireTx takes key with pg_advisory_xact_lock inside tx, blocking until
// it is granted or ctx ends, and returns the fencing token drawn by the same
// statement once the lock is held. The lock lasts until tx commits or rolls
// back; there is nothing to release, and no session is pinned, so this form
// works through a transaction-pooling proxy (PgBouncer in transaction
// mode), where session locks do not.
//
// The wait happens in the server on tx's own connection. When ctx ends the
// driver cancels the statement (pgx sends a cancel request), which ends the
// server-side wait; tx is then aborted and must be rolled back. The error
// matches sqllock.ErrNotAcquired and ctx.Err(). The lock conflicts with
// Acquire and TryAcquire of every Locker with the same namespace.
//
// MySQL named locks are not transactional: there it returns an error
// matching sqllock.ErrUnsupported.
func (l *Locker) AcquireTx(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
	return l.acquireTx(ctx, tx, key, true)
}

// TryAcquireTx is AcquireTx that does not wait: an error matching
// sqllock.ErrNotAcquired when another session holds key.
func (l *Locker) TryAcquireTx(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
	return l.acquireTx(ctx, tx, key, false)
}

func (l *Locker) acquireTx(ctx context.Context, tx *sql.Tx, key string, wait bool) (int64, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return 0, fmt.Errorf("advisory: acquire tx %q: %w", key, err)
	}
	if tx == nil {
		return 0, fmt.Errorf("advisory: acquire tx %q: %w: nil *sql.Tx", key, sqllock.ErrInvalidOption)
	}
	if l.dialect != sqllock.Postgres {
		return 0, fmt.Errorf("advisory: acquire tx %q: %w: MySQL named locks outlive transactions; use rowlock", key, sqllock.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return 0, errors.Join(fmt.Errorf("advisory: acquire tx %q: %w", key, sqllock.ErrNotAcquired), err)
	}
	q := l.q.txTry
	if wait {
		q = l.q.txLock
	}
	var tok sql.NullInt64
	err := tx.QueryRowContext(ctx, q, PostgresKey(l.cfg.namespace, key)).Scan(&tok)
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, errors.Join(fmt.Errorf("advisory: acquire tx %q: %w", key, sqllock.ErrNotAcquired), ctx.Err())
	case err != nil:
		return 0, fmt.Errorf("advisory: acquire tx %q: %w", key, err)
	case !tok.Valid:
		return 0, fmt.Errorf("advisory: acquire tx %q: %w", key, sqllock.ErrNotAcquired)
	}
	return tok.Int64, nil
}
