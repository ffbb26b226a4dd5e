package optimistic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// ErrSoldOut: every stripe of a counter's item is at zero.
var ErrSoldOut = errors.New("sold out")

// MaxStripes is the largest number of rows a Counter spreads an item over.
const MaxStripes = 64

// Counter is a striped stock counter: each item's units are spread over N
// rows (stripes), so N writers can take units of one hot item at once
// instead of queueing on one row lock. It is safe for concurrent use.
//
// Its table has one row per item and stripe (see CounterSchema). A take is
// one guarded statement, UPDATE ... SET qty = qty - 1 WHERE item = ? AND
// stripe = ? AND qty > 0: the guard is the compare, on the value itself, so
// a stripe can never go below zero and no version column is needed.
type Counter struct {
	db      *sql.DB
	d       sqllock.Dialect
	name    string
	stripes int
	q       counterQueries
	stmts   stmtCache
	// empty remembers, per item, the stripes this process last found at
	// zero (a bitmask). It only orders the search; a take still tries every
	// stripe before reporting ErrSoldOut.
	empty sync.Map // item -> *atomic.Uint64
}

type counterQueries struct {
	take, total, clear, insert, left string
}

// CounterSchema returns the CREATE TABLE statement for a Counter's table in
// dialect d: columns item, stripe and qty, keyed by (item, stripe).
func CounterSchema(d sqllock.Dialect, table string) (string, error) {
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return "", fmt.Errorf("optimistic: counter table: %w", err)
	}
	switch d {
	case sqllock.Postgres:
		return `CREATE TABLE ` + t + ` (item varchar(255) NOT NULL, stripe integer NOT NULL, qty bigint NOT NULL, PRIMARY KEY (item, stripe))`, nil
	case sqllock.MySQL:
		return `CREATE TABLE ` + t + ` (item varbinary(255) NOT NULL, stripe int NOT NULL, qty bigint NOT NULL, PRIMARY KEY (item, stripe)) ENGINE=InnoDB`, nil
	default:
		return `CREATE TABLE ` + t + ` (item TEXT NOT NULL, stripe INTEGER NOT NULL, qty INTEGER NOT NULL, PRIMARY KEY (item, stripe))`, nil
	}
}

// NewCounter returns a Counter over table (created with CounterSchema) that
// spreads each item over stripes rows, 1 to MaxStripes. Every process must
// use the same number of stripes for a table: Take reports an item spread
// over more stripes than it has once its own run dry. It does not touch
// the database and never closes db.
func NewCounter(db *sql.DB, d sqllock.Dialect, table string, stripes int) (*Counter, error) {
	if db == nil {
		return nil, fmt.Errorf("optimistic: counter: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	if stripes < 1 || stripes > MaxStripes {
		return nil, fmt.Errorf("optimistic: counter %s: %w: %d stripes, want 1 to %d", table, sqllock.ErrInvalidOption, stripes, MaxStripes)
	}
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return nil, fmt.Errorf("optimistic: counter table: %w", err)
	}
	p := func(i int) string { return placeholder(d, i) }
	c := &Counter{db: db, d: d, name: table, stripes: stripes}
	c.q.take = `UPDATE ` + t + ` SET qty = qty - 1 WHERE item = ` + p(1) + ` AND stripe = ` + p(2) + ` AND qty > 0`
	c.q.total = `SELECT COALESCE(SUM(qty), 0) FROM ` + t + ` WHERE item = ` + p(1)
	c.q.left = `SELECT COALESCE(SUM(qty), 0), COUNT(*) FROM ` + t + ` WHERE item = ` + p(1)
	c.q.clear = `DELETE FROM ` + t + ` WHERE item = ` + p(1)
	c.q.insert = `INSERT INTO ` + t + ` (item, stripe, qty) VALUES (` + p(1) + `, ` + p(2) + `, ` + p(3) + `)`
	return c, nil
}

// Close closes the Counter's prepared statements; it never closes the
// *sql.DB.
func (c *Counter) Close() error {
	c.stmts.close()
	return nil
}

// Stripes is the number of rows each item is spread over.
func (c *Counter) Stripes() int { return c.stripes }

// Set replaces item's stock with total units, spread evenly over the
// stripes, in one transaction.
func (c *Counter) Set(ctx context.Context, item string, total int64) error {
	if err := sqllock.ValidateKey(item); err != nil {
		return fmt.Errorf("optimistic: counter %s: set %q: %w", c.name, item, err)
	}
	if total < 0 {
		return fmt.Errorf("optimistic: counter %s: set %q: %w: negative stock %d", c.name, item, sqllock.ErrInvalidOption, total)
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("optimistic: counter %s: set %q: %w", c.name, item, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, c.q.clear, item); err != nil {
		return fmt.Errorf("optimistic: counter %s: set %q: %w", c.name, item, err)
	}
	n := int64(c.stripes)
	for s := range c.stripes {
		qty := total / n
		if int64(s) < total%n {
			qty++
		}
		if _, err := tx.ExecContext(ctx, c.q.insert, item, s, qty); err != nil {
			return fmt.Errorf("optimistic: counter %s: set %q: %w", c.name, item, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("optimistic: counter %s: set %q: %w", c.name, item, err)
	}
	c.hint(item).Store(0)
	return nil
}

// Total returns item's stock: the sum of its stripes in one read.
func (c *Counter) Total(ctx context.Context, item string) (int64, error) {
	var n int64
	if err := c.stmts.queryRow(ctx, c.db, c.q.total, item).Scan(&n); err != nil {
		return 0, fmt.Errorf("optimistic: counter %s: total %q: %w", c.name, item, err)
	}
	return n, nil
}

// Take removes one unit of item. It starts at a random stripe (stripes this
// process saw empty last), falls over to the others, and returns an error
// matching ErrSoldOut only after every stripe refused and one read of all
// of them sums to zero; a restock seen by that read starts a new round.
// When that read finds the item spread over more stripes than c has (set
// by a Counter with more), the units beyond them are out of c's reach: Take
// returns an error matching sqllock.ErrInvalidOption that says so.
func (c *Counter) Take(ctx context.Context, item string) error {
	if err := sqllock.ValidateKey(item); err != nil {
		return fmt.Errorf("optimistic: counter %s: take %q: %w", c.name, item, err)
	}
	hint := c.hint(item)
	order := make([]int, 0, c.stripes)
	for {
		empty := hint.Load()
		order = order[:0]
		start := rand.N(c.stripes)
		for pass := range 2 { // stripes with stock first, then the rest
			for i := range c.stripes {
				s := (start + i) % c.stripes
				if (empty>>s&1 == 1) == (pass == 1) {
					order = append(order, s)
				}
			}
		}
		for _, s := range order {
			res, err := c.stmts.exec(ctx, c.db, c.q.take, item, s)
			if err != nil {
				return fmt.Errorf("optimistic: counter %s: take %q: %w", c.name, item, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("optimistic: counter %s: take %q: %w", c.name, item, err)
			}
			if n == 1 {
				return nil
			}
			hint.Or(1 << s)
		}
		var total, rows int64
		if err := c.stmts.queryRow(ctx, c.db, c.q.left, item).Scan(&total, &rows); err != nil {
			return fmt.Errorf("optimistic: counter %s: take %q: %w", c.name, item, err)
		}
		if total <= 0 {
			return fmt.Errorf("optimistic: counter %s: take %q: %w", c.name, item, ErrSoldOut)
		}
		if rows > int64(c.stripes) {
			// Another round would find the same: stock only in stripes
			// this Counter never tries.
			return fmt.Errorf("optimistic: counter %s: take %q: %w: the table spreads the item over %d stripes but this Counter uses %d "+
				"and found those empty, with %d units left in the others; every process must use the same count "+
				"(NewCounter with %d stripes), or Set the item again through this Counter",
				c.name, item, sqllock.ErrInvalidOption, rows, c.stripes, total, rows)
		}
		hint.Store(0) // restocked since: look everywhere again
	}
}

func (c *Counter) hint(item string) *atomic.Uint64 {
	if h, ok := c.empty.Load(item); ok {
		return h.(*atomic.Uint64)
	}
	h, _ := c.empty.LoadOrStore(item, new(atomic.Uint64))
	return h.(*atomic.Uint64)
}
