package optimistic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

// store is one dialect's SQL for this package: how names are quoted and
// parameters written (the Table builds its statements from those), the
// Locker's statements and how they run, and a Counter's statements and
// table. Each store_<dialect>.go file registers one; the rest of the
// package asks the store, never the dialect, so a new dialect is a new
// store file.
type store interface {
	// quote validates name as a table name (optionally schema-qualified)
	// or column name and quotes it.
	quote(name string) (string, error)
	// ph is the i-th (1-based) bind parameter.
	ph(i int) string
	// versions is the Locker's statements on the version table t, quoted.
	versions(t string) versionStore
	// counter is a Counter's statements on table t, quoted.
	counter(t string) counterQueries
	// counterSchema is the CREATE TABLE of a Counter's table t, quoted.
	counterSchema(t string) string
}

// versionStore is how the Locker stamps, releases and reads a key's
// version. Statements on a pool go through c, the Locker's cache.
type versionStore interface {
	// stamp writes a fresh version for key, drawn from the fencing
	// sequence under the row lock, and returns it.
	stamp(ctx context.Context, c *stmtcache.Cache, db *sql.DB, key string) (int64, error)
	// release negates key's version on e if it is still token, and
	// reports whether it was.
	release(ctx context.Context, c *stmtcache.Cache, e sqllock.Execer, key string, token int64) (bool, error)
	// read returns key's version, 0 when the key has no row.
	read(ctx context.Context, c *stmtcache.Cache, db *sql.DB, key string) (int64, error)
}

// stores are the dialects this package serves; each store file adds its
// own at init.
var stores = map[sqllock.Dialect]store{}

func register(d sqllock.Dialect, s store) { stores[d] = s }

// storeFor returns d's store.
func storeFor(d sqllock.Dialect) (store, error) {
	s, ok := stores[d]
	switch {
	case !ok && d.Valid():
		return nil, fmt.Errorf("%w: no optimistic store for %v", sqllock.ErrUnsupported, d)
	case !ok:
		return nil, fmt.Errorf("%w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	return s, nil
}

// versionSQL is a versionStore of three statements, the stamp one that
// returns the version it wrote (INSERT ... RETURNING).
type versionSQL struct {
	stampQuery   string // key -> version
	releaseQuery string // key, version: negate when still ours
	readQuery    string // key -> version
}

func (s versionSQL) stamp(ctx context.Context, c *stmtcache.Cache, db *sql.DB, key string) (int64, error) {
	var v int64
	err := c.QueryRow(ctx, db, s.stampQuery, []any{key}, &v)
	return v, err
}

func (s versionSQL) release(ctx context.Context, c *stmtcache.Cache, e sqllock.Execer, key string, token int64) (bool, error) {
	res, err := exec(ctx, c, e, s.releaseQuery, key, token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s versionSQL) read(ctx context.Context, c *stmtcache.Cache, db *sql.DB, key string) (int64, error) {
	var v int64
	err := c.QueryRow(ctx, db, s.readQuery, []any{key}, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// syntax is what stores share: quoting and parameters, told apart by
// data (a Table's statements name the caller's columns, so they are put
// together from them). Each store embeds it.
type syntax struct {
	dialect  sqllock.Dialect // whose quotes
	mark     string          // the parameter marker: "$", "?"
	numbered bool            // markers carry their position: $1, ?1
}

func (s syntax) quote(name string) (string, error) { return dialect.QuoteIdent(s.dialect, name) }

func (s syntax) ph(i int) string {
	if s.numbered {
		return s.mark + strconv.Itoa(i)
	}
	return s.mark
}

// counterQueries are a Counter's statements.
type counterQueries struct {
	take   string // item, stripe: one unit off a stripe that has one
	total  string // item -> units left
	left   string // item -> units left, stripes
	clear  string // item
	insert string // item, stripe, qty
}
