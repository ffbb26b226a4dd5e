package advisory

import (
	"context"
	"fmt"
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

	// The same on a session that knows its token era (migration 00020):
	// the value of sqllock_token_seq (unlogged, migration 00021), or of the
	// shared sequence without waiting for its WAL flush before 00021, the
	// era joined by pgToken.
	pgTryAsync         = "SELECT CASE WHEN pg_try_advisory_lock($1) THEN sqllock_next_token_async() END"
	pgTrySharedAsync   = "SELECT CASE WHEN pg_try_advisory_lock_shared($1) THEN sqllock_next_token_async() END"
	pgBlockAsync       = "SELECT sqllock_next_token_async() FROM (SELECT pg_advisory_lock($1) OFFSET 0) AS granted"
	pgBlockSharedAsync = "SELECT sqllock_next_token_async() FROM (SELECT pg_advisory_lock_shared($1) OFFSET 0) AS granted"

	// pgEra reads the server's token era, or begins one (migration 00020).
	pgEra = "SELECT sqllock_token_era()"
)

// pgStmts are one lock statement's three forms: full draws the token
// whole (sqllock_next_token), counter the sequence value under the
// timeline, async the value under the era.
type pgStmts struct{ full, counter, async string }

var (
	pgTryStmts         = pgStmts{pgTry, pgTryCounter, pgTryAsync}
	pgTrySharedStmts   = pgStmts{pgTryShared, pgTrySharedCounter, pgTrySharedAsync}
	pgBlockStmts       = pgStmts{pgBlock, pgBlockCounter, pgBlockAsync}
	pgBlockSharedStmts = pgStmts{pgBlockShared, pgBlockSharedCounter, pgBlockSharedAsync}
)

// tokenHigh is what a pinned server session knows of the bits its tokens
// carry above the sequence value.
type tokenHigh struct {
	bits int64      // the era, or the timeline (0 until a token shows it)
	by   highSource // which, and so which statements draw
}

type highSource uint8

const (
	highUnknown  highSource = iota // nothing drawn yet: read the era first
	highEra                        // bits is the session's era (async)
	highTimeline                   // no era function (a schema before 00020): counter
	highFull                       // no counter function either (before 00019): full
)

// pgToken draws a token on h with one of q's statements.
//
// A session whose schema has the token era (migration 00020) reads the
// era once, then draws the sequence value, and joins era << 40 | value.
// The value comes from sqllock_token_seq, unlogged on PostgreSQL 15 and
// later (migration 00021), so the draw writes no WAL; before 00021, or on
// an older server, from a logged sequence in a transaction that does not
// wait for its WAL flush. A crash that loses or resets values handed out
// also empties the era's unlogged table, so the next session begins a
// larger era before any token of it (the migrations say why this holds).
// Reading the era once per session is safe:
//
//   - no session lives through a crash recovery, and one on a standby
//     cannot read the era (an unlogged table), so the era a session read
//     stays the server's for as long as the session lives;
//   - one pinned *sql.Conn is one server session: the session forgets the
//     era when it pins another connection. Behind a transaction pooler it
//     is not, and session locks are refused there
//     (WithTransactionPooler); a caller's transaction (h.high() nil)
//     draws in full, and its commit is the caller's.
//
// Where the era function is missing, the session draws as before it:
// the sequence value under the timeline, read from its first full token
// (a server's timeline changes only when it leaves recovery, which no
// session that drew a token lives through), or, before migration 00019,
// every token in full. The refusals stay in the statements: the
// sqllock.require_sync_replica check (with it on, a server whose commits
// would not wait for a synchronous standby hands out no token) and the
// sequence's MAXVALUE; the era's and timeline's bounds are checked where
// they are read.
func pgToken(ctx context.Context, h handle, q pgStmts, args []any) (int64, bool, error) {
	hi := h.high()
	if hi == nil {
		return queryToken(ctx, h, q.full, args)
	}
	if hi.by == highUnknown {
		var era int64
		err := h.queryRow(ctx, pgEra, nil, &era)
		switch {
		case err == nil:
			*hi = tokenHigh{bits: era, by: highEra}
		case dberr.IsMissingRoutine(err):
			*hi = tokenHigh{by: highTimeline}
		default:
			return 0, false, fmt.Errorf("token era: %w", err)
		}
	}
	switch hi.by {
	case highEra:
		n, ok, err := queryToken(ctx, h, q.async, args)
		if dberr.IsMissingRoutine(err) {
			// Migrated down under the live session.
			*hi = tokenHigh{by: highTimeline}
			return pgToken(ctx, h, q, args)
		}
		if !ok || err != nil {
			return 0, ok, err
		}
		return hi.bits<<40 | n, true, nil
	case highTimeline:
		if hi.bits == 0 {
			tok, ok, err := queryToken(ctx, h, q.full, args)
			if ok && err == nil {
				hi.bits = tok >> 40
			}
			return tok, ok, err
		}
		n, ok, err := queryToken(ctx, h, q.counter, args)
		if dberr.IsMissingRoutine(err) {
			*hi = tokenHigh{by: highFull}
			return queryToken(ctx, h, q.full, args)
		}
		if !ok || err != nil {
			return 0, ok, err
		}
		return hi.bits<<40 | n, true, nil
	}
	return queryToken(ctx, h, q.full, args)
}

func (postgresStore) lockID(namespace, key string) lockID {
	id := PostgresKey(namespace, key)
	return lockID{args: []any{id}, wake: "p" + strconv.FormatInt(id, 16), hash: uint64(id)}
}

func (postgresStore) try(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	if m == shared {
		return pgToken(ctx, h, pgTrySharedStmts, id.args)
	}
	return pgToken(ctx, h, pgTryStmts, id.args)
}

func (postgresStore) block(ctx context.Context, h handle, id lockID, m mode) (int64, bool, error) {
	if m == shared {
		return pgToken(ctx, h, pgBlockSharedStmts, id.args)
	}
	return pgToken(ctx, h, pgBlockStmts, id.args)
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
