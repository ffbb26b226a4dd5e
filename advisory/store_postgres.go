package advisory

import (
	"context"
	"strconv"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
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

	// The same on a session whose timeline is known: the sequence value
	// alone (migration 00019), the timeline joined by pgToken.
	pgTryCounter         = "SELECT CASE WHEN pg_try_advisory_lock($1) THEN sqllock_next_token_counter() END"
	pgTrySharedCounter   = "SELECT CASE WHEN pg_try_advisory_lock_shared($1) THEN sqllock_next_token_counter() END"
	pgBlockCounter       = "SELECT sqllock_next_token_counter() FROM (SELECT pg_advisory_lock($1) OFFSET 0) AS granted"
	pgBlockSharedCounter = "SELECT sqllock_next_token_counter() FROM (SELECT pg_advisory_lock_shared($1) OFFSET 0) AS granted"
)

// pgToken runs full, whose token comes from sqllock_next_token(), or, on
// a session whose timeline h knows, counter, which draws the sequence value
// alone; the token is then the same timeline << 40 | value, joined here.
// The function reads the timeline on every call, twice (its range check
// and its value); once per session is enough:
//
//   - h's timeline is taken from a token drawn on h's server session, so
//     that session drew it outside recovery (nextval refuses on a standby);
//   - a server's timeline changes only when it leaves recovery (a
//     promotion, or a restart that recovers), and no session lives from
//     outside recovery into another recovery: a restart ends them all;
//   - so every later token of that session is on the same timeline, and
//     the token equals what sqllock_next_token() would have returned.
//     A session that connected to a standby and lives through its
//     promotion has drawn no token before it (nextval refused), so it
//     takes the new timeline from its first.
//
// One pinned *sql.Conn is one server session: the session forgets the
// timeline when it pins another connection. Behind a transaction pooler
// it is not, and session locks are refused there (WithTransactionPooler).
// The refusals stay in the statement: sqllock.require_sync_replica and
// the settings it checks can change under a live session (a reload), and
// the sequence's MAXVALUE bounds the value; the timeline's bound is
// checked where it is read.
//
// A schema before migration 00019 has no counter function: the statement
// fails when it is planned, before it locks anything, and the session
// draws its tokens in full from then on (tl < 0) rather than fail.
func pgToken(ctx context.Context, h handle, full, counter string, args []any) (int64, bool, error) {
	tl := h.timeline()
	if tl == nil || *tl <= 0 {
		tok, ok, err := queryToken(ctx, h, full, args)
		if ok && err == nil && tl != nil && *tl == 0 {
			*tl = tok >> 40
		}
		return tok, ok, err
	}
	n, ok, err := queryToken(ctx, h, counter, args)
	if dberr.IsMissingRoutine(err) {
		*tl = -1
		return queryToken(ctx, h, full, args)
	}
	if !ok || err != nil {
		return 0, ok, err
	}
	return *tl<<40 | n, true, nil
}

func (postgresStore) lockID(namespace, key string) lockID {
	id := PostgresKey(namespace, key)
	return lockID{args: []any{id}, wake: "p" + strconv.FormatInt(id, 16), hash: uint64(id)}
}

func (postgresStore) try(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	if m == shared {
		return pgToken(ctx, h, pgTryShared, pgTrySharedCounter, id.args)
	}
	return pgToken(ctx, h, pgTry, pgTryCounter, id.args)
}

func (postgresStore) block(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	if m == shared {
		return pgToken(ctx, h, pgBlockShared, pgBlockSharedCounter, id.args)
	}
	return pgToken(ctx, h, pgBlock, pgBlockCounter, id.args)
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
