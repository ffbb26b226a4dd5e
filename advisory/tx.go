package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/ctxend"
)

// AcquireTx takes key with pg_advisory_xact_lock inside tx, blocking until
// it is granted or ctx ends, and returns the fencing token drawn by the same
// statement once the lock is held. The lock lasts until tx commits or rolls
// back; there is nothing to release, and no session is pinned, so this form
// works through a transaction-pooling proxy (PgBouncer in transaction
// mode), where session locks do not.
//
// The wait happens in the server on tx's own connection. When ctx ends the
// driver gives the statement up and AcquireTx returns at once; tx is then
// aborted and must be rolled back. The error matches
// sqllock.ErrNotAcquired and ctx.Err(). pgx v5 gives up by closing the
// connection, which a server session waiting for a lock does not notice:
// it stays queued for the key until the holder lets go, then takes the
// lock and ends at once, freeing it (client_connection_check_interval
// ends it sooner). The lock conflicts with
// Acquire and TryAcquire of every Locker with the same namespace.
//
// MySQL named locks are not transactional: there it returns an error
// matching sqllock.ErrUnsupported. After Close it returns an error
// matching sqllock.ErrClosed.
func (l *Locker) AcquireTx(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
	return l.acquireTx(ctx, tx, key, true)
}

// TryAcquireTx is AcquireTx that does not wait: an error matching
// sqllock.ErrNotAcquired when another session holds key.
func (l *Locker) TryAcquireTx(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
	return l.acquireTx(ctx, tx, key, false)
}

func (l *Locker) acquireTx(ctx context.Context, tx *sql.Tx, key string, wait bool) (int64, error) {
	const op = "acquire tx"
	if err := sqllock.ValidateKey(key); err != nil {
		return 0, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	}
	if tx == nil {
		return 0, fmt.Errorf("advisory: %s %q: %w: nil *sql.Tx", op, key, sqllock.ErrInvalidOption)
	}
	if err := l.st.supports(featTx); err != nil {
		return 0, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	}
	if l.isClosed() {
		return 0, closedErr(op, key, false)
	}
	if err := ctxend.Err(ctx); err != nil {
		return 0, notAcquired(op, key, err)
	}
	tok, ok, err := l.st.acquireTx(ctx, txHandle{tx}, l.lockID(key), wait)
	switch {
	case err != nil && ctxend.Err(ctx) != nil:
		return 0, notAcquired(op, key, ctxend.Err(ctx))
	case err != nil:
		return 0, fmt.Errorf("advisory: %s %q: %w", op, key, err)
	case !ok:
		return 0, fmt.Errorf("advisory: %s %q: %w", op, key, sqllock.ErrNotAcquired)
	}
	return tok, nil
}

// DoTx runs fn in a new transaction of the Locker's *sql.DB that holds key
// from AcquireTx on, with the fencing token; it commits when fn returns nil
// and rolls back otherwise, which ends the lock. It is the form of
// sqllock.Do for a Locker made WithTransactionPooler: the proxy keeps the
// transaction, and so the lock, on one server session, and no other
// client's. ctx bounds the wait and the work: database/sql rolls the
// transaction back when ctx ends. PostgreSQL only (see AcquireTx).
func (l *Locker) DoTx(ctx context.Context, key string, fn func(ctx context.Context, tx *sql.Tx, token int64) error) error {
	if fn == nil {
		return fmt.Errorf("advisory: do tx %q: %w: nil function", key, sqllock.ErrInvalidOption)
	}
	if err := l.st.supports(featTx); err != nil {
		return fmt.Errorf("advisory: do tx %q: %w", key, err)
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		if cerr := ctxend.Err(ctx); cerr != nil {
			return notAcquired("do tx", key, cerr)
		}
		return fmt.Errorf("advisory: do tx %q: begin: %w", key, err)
	}
	tok, err := l.AcquireTx(ctx, tx, key)
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(ctx, tx, tok); err != nil {
		if rb := tx.Rollback(); rb != nil && !errors.Is(rb, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("advisory: do tx %q: rollback: %w", key, rb))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("advisory: do tx %q: commit: %w", key, err)
	}
	return nil
}
