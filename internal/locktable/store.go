package locktable

import (
	"context"
	"database/sql"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

// store is one dialect's lock table: the text of each statement, the order
// of its arguments, and how its result is read (a row or an affected-row
// count; how "won", the token and the holder come back). Each
// store_<dialect>.go file registers one; the rest of the package asks the
// store, never the dialect, so a new dialect is a new store file.
type store interface {
	// take runs one take (see Table.Take). Remaining is set when the
	// holder is known and the take refused, negative when unknown.
	take(ctx context.Context, h handle, c Claim) (Attempt, error)
	// renew extends owner's row under token to ttl from now; it returns
	// the rows changed (1, or 0 when the row is not that holder's) and
	// when the statement that ran was sent (a store that looks again for
	// a busy database sends more than one).
	renew(ctx context.Context, h handle, key, owner string, token int64, ttl time.Duration) (int64, time.Time, error)
	// release gives one hold back and frees the row with the last, from
	// acquired_at + keep on; it returns the rows changed.
	release(ctx context.Context, h handle, key, owner string, token int64, keep time.Duration) (int64, error)
	// releaseOwner gives one hold of owner's live row back, whatever its
	// token; it returns the rows changed.
	releaseOwner(ctx context.Context, h handle, key, owner string) (int64, error)
	// forceRelease frees the live row held under token, every hold; it
	// returns the rows changed.
	forceRelease(ctx context.Context, h handle, key string, token int64) (int64, error)
	// forceReleaseTx is forceRelease inside tx.
	forceReleaseTx(ctx context.Context, tx *sql.Tx, key string, token int64) (int64, error)
	// audit writes, inside tx, the audit record of a force release of the
	// live row held under token (table names the lock table), locking that
	// row; it returns the rows written (0 when no such row).
	audit(ctx context.Context, tx *sql.Tx, key string, token int64, table string, a Audit) (int64, error)
	// reap deletes at most batch rows expired for longer than grace; it
	// returns how many.
	reap(ctx context.Context, db *sql.DB, grace time.Duration, batch int) (int64, error)
	// sql returns the statement texts the rest of the package runs itself.
	sql() *statements
}

// closer is a store that holds something of its own (a connection) until
// its Table closes.
type closer interface{ close() }

// queuer is a store whose rows queue the Lockers waiting for them, so
// that it can serve them in order (Config.Fair).
type queuer interface {
	// leave takes entry out of key's queue; it returns the rows changed.
	leave(ctx context.Context, h handle, key string, entry Entry) (int64, error)
	// void gives back a grant of key to owner's entry that nobody took:
	// the one under token, or with token 0 one under a token above above;
	// it returns the rows changed.
	void(ctx context.Context, h handle, key, owner string, entry Entry, token, above int64) (int64, error)
}

// statements are the texts of a store's statements, each read the same
// way in every dialect. A store keeps those it runs itself beside them.
type statements struct {
	// holder takes a key and returns (token, owner, host) of its live
	// holder, or no row.
	holder string
	// list returns (lock_key, owner, host, hold_count, token, acquired_at,
	// expires_at, µs since acquired_at) of every live row, by key.
	list string
	// ddl creates the table.
	ddl string
	// live, followed by n parameters (param(1) to param(n)) and ")",
	// returns the lock_key of each of those keys held now.
	live  string
	param func(i int) string
}

func (s *statements) sql() *statements { return s }

// names are a table's names as its statements use them.
type names struct {
	table   string // quoted
	index   string // quoted: the expires_at index (SQLite only)
	channel string // the NOTIFY channel, where the dialect has one
	call    string // the channel that calls one waiting Locker
}

// stores make each dialect's store; each store file adds its own at init.
var stores = map[sqllock.Dialect]func(n names, cfg Config) store{}

func register(d sqllock.Dialect, open func(n names, cfg Config) store) { stores[d] = open }

// handle runs a Table's statements, each prepared once through its cache.
type handle struct {
	*sql.DB
	stmts *stmtcache.Cache
}

// exec runs q and returns the number of rows it changed.
func (h handle) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := h.stmts.Exec(ctx, h.DB, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// count runs q and returns the number of rows it returned.
func (h handle) count(ctx context.Context, q string, args ...any) (int64, error) {
	rows, err := h.stmts.Query(ctx, h.DB, q, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// queryRow runs q and scans its one row into dest; sql.ErrNoRows when
// there is none.
func (h handle) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return h.stmts.QueryRow(ctx, h.DB, q, args, dest...)
}

// execTx runs q in tx and returns the number of rows it changed.
func execTx(ctx context.Context, tx *sql.Tx, q string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// micros is d in whole microseconds, the unit every statement takes.
func micros(d time.Duration) int64 { return d.Microseconds() }

// execReap runs q, a DELETE taking (grace µs, batch), unprepared, and
// returns the rows it deleted.
func execReap(ctx context.Context, db *sql.DB, q string, grace time.Duration, batch int) (int64, error) {
	res, err := db.ExecContext(ctx, q, micros(grace), batch)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// remaining turns the microseconds a statement reports left on a holder's
// row into a duration, never negative.
func remaining(us int64) time.Duration { return time.Duration(max(us, 0)) * time.Microsecond }
