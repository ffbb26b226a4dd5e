package advisory

import (
	"context"
	"strconv"

	"github.com/sqllock/sqllock"
)

func init() { register(sqllock.Postgres, postgresStore{}) }

// postgresStore serves PostgreSQL advisory locks: 64-bit ids, shared mode
// and transaction-level locks.
type postgresStore struct{}

const (
	// CASE draws the token only when the lock was granted: the token is
	// drawn by the session that holds the lock, while it holds it.
	pgTry       = "SELECT CASE WHEN pg_try_advisory_lock($1) THEN sqllock_next_token() END"
	pgTryShared = "SELECT CASE WHEN pg_try_advisory_lock_shared($1) THEN sqllock_next_token() END"

	// OFFSET 0 keeps the planner from flattening the subquery, so the lock
	// is granted before the token is drawn.
	pgBlock       = "SELECT sqllock_next_token() FROM (SELECT pg_advisory_lock($1) OFFSET 0) AS granted"
	pgBlockShared = "SELECT sqllock_next_token() FROM (SELECT pg_advisory_lock_shared($1) OFFSET 0) AS granted"

	pgUnlock       = "SELECT pg_advisory_unlock($1)"
	pgUnlockShared = "SELECT pg_advisory_unlock_shared($1)"
	// The cast gives the row a value to scan: the function returns void.
	pgUnlockAll = "SELECT pg_advisory_unlock_all()::text"

	// OFFSET 0 keeps the planner from flattening the subquery, so the lock
	// is granted before the token is drawn.
	pgTxLock = "SELECT sqllock_next_token() FROM (SELECT pg_advisory_xact_lock($1) OFFSET 0) AS granted"
	pgTxTry  = "SELECT CASE WHEN pg_try_advisory_xact_lock($1) THEN sqllock_next_token() END"
)

func (postgresStore) lockID(namespace, key string) lockID {
	id := PostgresKey(namespace, key)
	return lockID{args: []any{id}, wake: "p" + strconv.FormatInt(id, 16), hash: uint64(id)}
}

func (postgresStore) try(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	q := pgTry
	if m == shared {
		q = pgTryShared
	}
	return queryToken(ctx, h, q, id.args)
}

func (postgresStore) block(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	q := pgBlock
	if m == shared {
		q = pgBlockShared
	}
	return queryToken(ctx, h, q, id.args)
}

func (postgresStore) backendID() string { return "SELECT pg_backend_pid()" }

// interrupt cancels the statement: the session lives on, and a wait that
// was granted as the cancel came holds the lock (the caller discards the
// session either way).
func (postgresStore) interrupt(id int64) string {
	return "SELECT pg_cancel_backend(" + strconv.FormatInt(id, 10) + ")"
}

func (postgresStore) unlock(ctx context.Context, h handle, id lockID, m mode) (bool, error) {
	q := pgUnlock
	if m == shared {
		q = pgUnlockShared
	}
	return queryHeld(ctx, h, q, id.args)
}

func (postgresStore) unlockAll(ctx context.Context, h handle) error {
	var void any
	return h.queryRow(ctx, pgUnlockAll, nil, &void)
}

func (postgresStore) acquireTx(ctx context.Context, h handle, id lockID, wait bool) (int64, bool, error) {
	q := pgTxTry
	if wait {
		q = pgTxLock
	}
	return queryToken(ctx, h, q, id.args)
}

func (postgresStore) supports(feature) error { return nil }

// prepare is false: pgx caches the statements of each connection itself,
// and its statements run about 3% slower through database/sql's Stmt.
func (postgresStore) prepare() bool { return false }
