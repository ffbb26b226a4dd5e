package rowlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sqllock/sqllock"
)

// LockRows locks the existing rows of an application table whose keyColumn
// is one of keys (stock items, accounts), in one statement, in ascending
// key order, and returns how many rows it locked (duplicate keys count
// once). The locks last until tx ends. tx is a *sql.Tx (such as Lease.Tx),
// or a *sql.Conn inside a transaction.
//
// Two transactions that lock overlapping sets of rows one by one, each in
// its own order, can deadlock, and the database then aborts one of them.
// Locking every set with LockRows takes the rows in the same global order
// in every transaction, so they queue instead of deadlocking.
//
// Work done in tx itself needs no fencing token: the row locks and the
// writes end together, when tx commits or rolls back (a holder whose
// session dies loses both), so no later holder of the rows can see a
// stale write of this one. For work outside the database under these
// locks (a payment call, a file, another store), draw a token with
// [Token] in tx after LockRows and hand it to that resource's fence.
//
// A *sqlx.Tx serves as tx as it is; a pgx.Tx through the pgxq adapter.
//
// table and keyColumn are validated as identifiers and quoted; keys are
// bound parameters. keyColumn should be the primary key or a unique
// indexed column: the database locks the rows its scan visits, so without
// an index it would lock the whole table. Keys with no row lock nothing on
// PostgreSQL; on MariaDB under REPEATABLE READ they take gap locks, which
// block inserts near them, as any locking read does.
func LockRows[K cmp.Ordered](ctx context.Context, tx sqllock.Querier, d sqllock.Dialect, table, keyColumn string, keys ...K) (int, error) {
	dl, err := dialectOf(d, "rowlock: lock rows: ")
	if err != nil {
		return 0, err
	}
	t, err := dl.quote(table)
	if err != nil {
		return 0, fmt.Errorf("rowlock: lock rows: table: %w", err)
	}
	c, err := dl.quote(keyColumn)
	if err != nil {
		return 0, fmt.Errorf("rowlock: lock rows of %s: key column: %w", table, err)
	}
	if tx == nil {
		return 0, fmt.Errorf("rowlock: lock rows of %s: %w: nil transaction", table, sqllock.ErrInvalidOption)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) == 0 {
		return 0, nil
	}
	var b strings.Builder
	args := make([]any, len(sorted))
	b.WriteString("SELECT 1 FROM " + t + " WHERE " + c + " IN (")
	for i, k := range sorted {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(dl.placeholder(i + 1))
		args[i] = k
	}
	// ORDER BY makes the lock order the same in every transaction: the
	// rows are locked as the sorted (or index-ordered) scan returns them.
	b.WriteString(") ORDER BY " + c + " FOR UPDATE")
	rows, err := tx.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return 0, fmt.Errorf("rowlock: lock rows of %s: %w", table, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("rowlock: lock rows of %s: %w", table, err)
	}
	return n, nil
}

// Token draws a fencing token in tx from the shared sequence
// (sqllock_fence_seq, from the migrations; on PostgreSQL through
// sqllock_next_token, which adds the timeline): larger than every token drawn
// before it, by any key or strategy of the database. Drawn after
// [LockRows], in the transaction that holds the row locks, it fences the
// work done outside the database under those locks: any later holder of
// the rows locks them after tx ends, and draws a larger token.
func Token(ctx context.Context, tx sqllock.Querier, d sqllock.Dialect) (int64, error) {
	dl, err := dialectOf(d, "rowlock: token: ")
	if err != nil {
		return 0, err
	}
	if tx == nil {
		return 0, fmt.Errorf("rowlock: token: %w: nil transaction", sqllock.ErrInvalidOption)
	}
	rows, err := tx.QueryContext(ctx, dl.tokenQuery())
	if err != nil {
		return 0, fmt.Errorf("rowlock: token: %w", err)
	}
	defer rows.Close()
	var token int64
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("rowlock: token: %w", err)
		}
		return 0, fmt.Errorf("rowlock: token: the sequence returned no row")
	}
	if err := rows.Scan(&token); err != nil {
		return 0, fmt.Errorf("rowlock: token: %w", err)
	}
	return token, rows.Close()
}
