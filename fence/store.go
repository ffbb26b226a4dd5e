package fence

import (
	"context"
	"errors"

	"github.com/sqllock/sqllock"
)

// store is one dialect's fence: its statements, and how the outcome of a
// check is read back. Each store_<dialect>.go file registers a constructor;
// the rest of the package asks the store, never the dialect.
type store interface {
	// check records token for resource in q's transaction unless a larger
	// token is recorded. It returns nil when token was recorded, an error
	// made by stale when it was refused, and a database error otherwise.
	check(ctx context.Context, q sqllock.Querier, resource string, token int64) error
	// last reads the token recorded for resource; found is false when
	// there is none.
	last(ctx context.Context, q sqllock.Querier, resource string) (last int64, found bool, err error)
	// schema is the DDL of the fence table.
	schema() string
}

// stores makes each dialect's store for a table name, already validated and
// quoted; each store file adds its own at init.
var stores = map[sqllock.Dialect]func(table string) store{}

func register(d sqllock.Dialect, s func(table string) store) { stores[d] = s }

// queryInt runs query on q and reads the one integer column of its first
// row; found is false when there is no row.
func queryInt(ctx context.Context, q sqllock.Querier, query string, args ...any) (v int64, found bool, err error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, false, rows.Err()
	}
	if err := rows.Scan(&v); err != nil {
		return 0, false, err
	}
	return v, true, rows.Close()
}

// rowsAffected runs query on q and returns how many rows it changed.
func rowsAffected(ctx context.Context, q sqllock.Querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// upsertStore is a dialect whose check is an upsert that changes one row
// when it records the token and none when a larger token stands
// (INSERT ... ON CONFLICT ... DO UPDATE ... WHERE): PostgreSQL, SQLite.
type upsertStore struct {
	checkQuery, lastQuery, ddl string
}

func (s upsertStore) check(ctx context.Context, q sqllock.Querier, resource string, token int64) error {
	n, err := rowsAffected(ctx, q, s.checkQuery, resource, token)
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	// Refused. Read the newer token for the message only: at PostgreSQL's
	// snapshot isolation levels it may be older than the one that refused.
	last, found, err := s.last(ctx, q, resource)
	switch {
	case err != nil:
		return errors.Join(stale(resource, token, -1), err)
	case !found:
		return stale(resource, token, -1)
	}
	return stale(resource, token, last)
}

func (s upsertStore) last(ctx context.Context, q sqllock.Querier, resource string) (int64, bool, error) {
	return queryInt(ctx, q, s.lastQuery, resource)
}

func (s upsertStore) schema() string { return s.ddl }
