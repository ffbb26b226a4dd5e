package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/sqlutil"
	"github.com/sqllock/sqllock/optimistic"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// strategy is one way of locking, as the demos and bench use it. A strategy
// plugs in here and nowhere else.
type strategy struct {
	name     string
	dialects []sqllock.Dialect // the dialects that can serve it
	why      string            // why the others cannot
	// newLocker returns a Locker over db and its closer; nil for the
	// strategies that sell without one (optimistic, none).
	// With pooler, made for a transaction-pooling proxy (nil error only
	// when the Locker serves one).
	newLocker func(db *sql.DB, d sqllock.Dialect, pooler bool) (sqllock.Locker, func(), error)
	// buy sells one unit of s, through l when the strategy has a Locker;
	// sold is false once s is empty, retries counts attempts that had to
	// be repeated. nil: not built into this binary.
	buy func(ctx context.Context, l sqllock.Locker, s *stock) (sold bool, retries int, err error)
	// bench returns what bench measures, the library beside its raw SQL;
	// nil: no bench. With pooler, both sides in their forms for a
	// transaction-pooling proxy.
	bench func(ctx context.Context, db *sql.DB, d sqllock.Dialect, pooler bool) (*benchPlan, error)
	// forget drops what the strategy keeps per key once a run is done
	// with its keys; nil: nothing, or the package cleans up itself.
	forget func(ctx context.Context, db *sql.DB, d sqllock.Dialect, keys ...string)
	// demoOnly strategies run only when named (--strategy none).
	demoOnly bool
}

var allDialects = []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.SQLite, sqllock.MySQLCommon}

func newTablelock(db *sql.DB, d sqllock.Dialect, pooler bool) (sqllock.Locker, func(), error) {
	var opts []tablelock.Option
	if pooler {
		opts = append(opts, tablelock.WithTransactionPooler())
	}
	l, err := tablelock.New(db, d, opts...)
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// newFairTablelock is newTablelock in fair order (the bench's hot key).
func newFairTablelock(db *sql.DB, d sqllock.Dialect, _ bool) (sqllock.Locker, func(), error) {
	l, err := tablelock.New(db, d, tablelock.WithFairness(true))
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

func newRowlock(db *sql.DB, d sqllock.Dialect, pooler bool) (sqllock.Locker, func(), error) {
	var opts []rowlock.Option
	if pooler {
		opts = append(opts, rowlock.WithTransactionPooler())
	}
	l, err := rowlock.New(db, d, opts...)
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// newAdvisory's Locker, made for a pooler, locks only in a transaction:
// advisoryBuy takes it through DoTx.
func newAdvisory(db *sql.DB, d sqllock.Dialect, pooler bool) (sqllock.Locker, func(), error) {
	var opts []advisory.Option
	if pooler {
		opts = append(opts, advisory.WithTransactionPooler())
	}
	l, err := advisory.New(db, d, opts...)
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// forgetRows deletes the rows rowlock made for keys: it keeps one row per
// key ever locked, and the demo's and bench's keys are used once. A key's
// next holder would insert the row again, and its tokens come from the
// shared sequence, so nothing depends on the row staying.
func forgetRows(ctx context.Context, db *sql.DB, d sqllock.Dialect, keys ...string) {
	q := `DELETE FROM sqllock_rows WHERE lock_key = ?`
	if d == sqllock.Postgres {
		q = `DELETE FROM sqllock_rows WHERE lock_key = $1`
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, k := range keys {
		db.ExecContext(ctx, q, k)
	}
}

// strategies is the table the commands read.
var strategies = []strategy{
	{
		name: "tablelock", dialects: allDialects,
		newLocker: newTablelock,
		buy:       lockedBuy,
		bench:     benchTablelock,
	},
	{
		name: "rowlock", dialects: []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.MySQLCommon},
		why:       "SQLite has no SELECT ... FOR UPDATE; use tablelock",
		newLocker: newRowlock,
		buy:       rowlockBuy,
		bench:     benchRowlock,
		forget:    forgetRows,
	},
	{
		name: "optimistic", dialects: allDialects,
		buy:   optimisticBuy,
		bench: benchOptimistic,
	},
	{
		name: "advisory", dialects: []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.MySQLCommon},
		why:       "SQLite has no advisory locks; use tablelock",
		newLocker: newAdvisory,
		buy:       advisoryBuy,
		bench:     benchAdvisory,
	},
	{
		// No lock at all: what the others prevent. Run it with --strategy none.
		name: "none", dialects: allDialects, demoOnly: true,
		buy: unlockedBuy,
	},
}

// availability says whether s can run on d, and if not, why and with which
// exit code an explicit request for it fails.
func (s strategy) availability(d sqllock.Dialect) (ok bool, code int, reason string) {
	switch {
	case !slices.Contains(s.dialects, d):
		why := s.why
		if why == "" {
			why = "not served by " + d.String()
		}
		return false, exitUnsupported, "unsupported on " + d.String() + ": " + why
	case s.buy == nil:
		return false, exitUnsupported, "not built yet"
	}
	return true, 0, ""
}

// pick returns the strategies a --strategy value names ("all": every
// strategy but the demo-only ones, those d cannot serve listed as skipped).
// An explicit name d cannot serve fails with exit code 5.
func pick(list string, d sqllock.Dialect, need func(strategy) bool) (run []strategy, skipped []skip, err error) {
	var names []string
	if list == "" || list == "all" {
		for _, s := range strategies {
			if !s.demoOnly {
				names = append(names, s.name)
			}
		}
	} else {
		names = strings.Split(list, ",")
	}
	for _, n := range names {
		i := slices.IndexFunc(strategies, func(s strategy) bool { return s.name == strings.TrimSpace(n) })
		if i < 0 {
			var known []string
			for _, s := range strategies {
				known = append(known, s.name)
			}
			return nil, nil, fail(exitUsage, "unknown strategy %q: want all or one of %s", n, strings.Join(known, ", "))
		}
		s := strategies[i]
		ok, code, reason := s.availability(d)
		if ok && need != nil && !need(s) {
			ok, code, reason = false, exitUnsupported, "no benchmark yet"
		}
		if !ok {
			if list != "" && list != "all" {
				return nil, nil, fail(code, "strategy %s: %s", s.name, reason)
			}
			skipped = append(skipped, skip{s.name, reason})
			continue
		}
		run = append(run, s)
	}
	return run, skipped, nil
}

// skip is a strategy left out of a run, with the reason.
type skip struct {
	Strategy string `json:"strategy"`
	Reason   string `json:"reason"`
}

// stock is one item of the demo shop, a row of sqllock_demo_stock.
type stock struct {
	db    *sql.DB
	item  string
	work  time.Duration // pause between reading and writing the count
	read  string
	write string
	// cas is the same table for optimistic's compare-and-swap on the
	// version column.
	cas *optimistic.Table
	// pooler: the database is behind a transaction pooler, where an
	// advisory lock is taken in a transaction only and cas runs its
	// statements unprepared.
	pooler bool
}

// stockRow is a row of the demo table as optimistic reads and writes it.
type stockRow struct {
	Item    string `db:"item"`
	Units   int    `db:"units"`
	Version int64  `db:"version"`
}

const stockTable = "sqllock_demo_stock"

func newStock(db *sql.DB, d sqllock.Dialect, item string, work time.Duration, pooler bool) (*stock, error) {
	var opts []optimistic.TableOption
	if pooler {
		opts = append(opts, optimistic.WithTableTransactionPooler())
	}
	cas, err := optimistic.NewTable(d, stockTable, "item", "version", opts...)
	if err != nil {
		return nil, err
	}
	s := &stock{db: db, item: item, work: work, cas: cas, pooler: pooler}
	// The locked writes bump the version too, so that an optimistic writer
	// of the same row would see them.
	if d == sqllock.Postgres {
		s.read = `SELECT units FROM sqllock_demo_stock WHERE item = $1`
		s.write = `UPDATE sqllock_demo_stock SET units = $1, version = version + 1 WHERE item = $2`
	} else {
		s.read = `SELECT units FROM sqllock_demo_stock WHERE item = ?`
		s.write = `UPDATE sqllock_demo_stock SET units = ?, version = version + 1 WHERE item = ?`
	}
	return s, nil
}

func (s *stock) close() { s.cas.Close() }

// createStockTable makes the demo's table; each run uses its own item rows.
func createStockTable(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sqllock_demo_stock (
	item    varchar(200) NOT NULL PRIMARY KEY,
	units   integer      NOT NULL,
	version bigint       NOT NULL DEFAULT 0
)`)
	if err != nil || hasVersion(ctx, db) {
		return err
	}
	// A table made by an earlier sqllock has no version column.
	_, err = db.ExecContext(ctx, `ALTER TABLE sqllock_demo_stock ADD COLUMN version bigint NOT NULL DEFAULT 0`)
	if err != nil && hasVersion(ctx, db) {
		return nil // another sqllock added it first
	}
	return err
}

func hasVersion(ctx context.Context, db *sql.DB) bool {
	rows, err := db.QueryContext(ctx, `SELECT version FROM sqllock_demo_stock WHERE 1 = 0`)
	if err != nil {
		return false
	}
	rows.Close()
	return true
}

// insertRow and deleteRow add and drop an item of the demo table.
func insertRow(ctx context.Context, db *sql.DB, d sqllock.Dialect, item string, units int) error {
	q := `INSERT INTO sqllock_demo_stock (item, units) VALUES (?, ?)`
	if d == sqllock.Postgres {
		q = `INSERT INTO sqllock_demo_stock (item, units) VALUES ($1, $2)`
	}
	_, err := db.ExecContext(ctx, q, item, units)
	return err
}

func deleteRow(ctx context.Context, db *sql.DB, d sqllock.Dialect, item string) error {
	q := `DELETE FROM sqllock_demo_stock WHERE item = ?`
	if d == sqllock.Postgres {
		q = `DELETE FROM sqllock_demo_stock WHERE item = $1`
	}
	_, err := db.ExecContext(ctx, q, item)
	return err
}

func (s *stock) units(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.read, s.item).Scan(&n)
	return n, err
}

// querier is where a sale runs: the pool, or a lease's transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// sell is the critical section: read the count, pause, write it back less
// one. Without a lock two buyers read the same count and one sale is lost
// from it: the shop sells a unit it does not have.
func (s *stock) sell(ctx context.Context, q querier) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, s.read, s.item).Scan(&n); err != nil || n <= 0 {
		return false, err
	}
	s.pause()
	_, err := q.ExecContext(ctx, s.write, n-1, s.item)
	return err == nil, err
}

// pause stands for the work between the read and the write; without
// --work it still yields, so that unlocked buyers interleave.
func (s *stock) pause() {
	if s.work > 0 {
		time.Sleep(s.work)
	} else {
		runtime.Gosched()
	}
}

func (s *stock) key() string { return "sqllock-demo/stock/" + s.item }

// retryTransient runs try again while it fails with a transient database
// error (deadlock, serialization failure, SQLite busy), at most 100 times,
// and counts the repeats. A connection lost mid-statement is not retried:
// the sale may have committed with only the reply lost.
func retryTransient(try func() error) (retries int, err error) {
	for {
		err = try()
		if err == nil || !sqlutil.IsRetryable(err) || sqlutil.IsConnLoss(err) || retries >= 100 {
			return retries, err
		}
		retries++
	}
}

// lockedBuy sells one unit under the item's lock (tablelock, advisory):
// read, check and write on the pool while the lease is held.
func lockedBuy(ctx context.Context, l sqllock.Locker, s *stock) (sold bool, retries int, err error) {
	retries, err = retryTransient(func() error {
		sold = false
		err := sqllock.Do(ctx, l, s.key(), func(ctx context.Context) error {
			var err error
			sold, err = s.sell(ctx, s.db)
			return err
		})
		if sold && err != nil {
			// The sale committed and only the release failed: another try
			// would sell a second unit. %v, not %w: not to be retried.
			return fmt.Errorf("sold, then releasing the lock failed: %v", err)
		}
		return err
	})
	return sold, retries, err
}

// advisoryBuy is lockedBuy, but through a transaction pooler the lock is
// taken in the transaction that sells (DoTx): a session lock would stay
// on a server session the proxy hands to other clients.
func advisoryBuy(ctx context.Context, l sqllock.Locker, s *stock) (sold bool, retries int, err error) {
	if !s.pooler {
		return lockedBuy(ctx, l, s)
	}
	retries, err = retryTransient(func() error {
		return l.(*advisory.Locker).DoTx(ctx, s.key(), func(ctx context.Context, tx *sql.Tx, _ int64) error {
			var err error
			sold, err = s.sell(ctx, tx)
			return err
		})
	})
	return sold, retries, err
}

// rowlockBuy sells one unit inside the transaction that holds the item's
// row lock, so the sale commits with the release in one step, or not at all.
func rowlockBuy(ctx context.Context, l sqllock.Locker, s *stock) (sold bool, retries int, err error) {
	retries, err = retryTransient(func() error {
		return sqllock.Do(ctx, l, s.key(), func(ctx context.Context) error {
			tx, ok := rowlock.TxFrom(ctx)
			if !ok {
				return errors.New("no rowlock transaction in the lease's context")
			}
			var err error
			sold, err = s.sell(ctx, tx)
			return err
		})
	})
	return sold, retries, err
}

// casPolicy is optimistic's default backoff with far more attempts than
// its default 20: a buyer that gives up after a few lost races is a lost
// sale, and the demo counts the retries instead. The cap only stops a
// livelock.
var casPolicy = optimistic.LimitAttempts(optimistic.ExponentialBackoff(optimistic.DefaultMinBackoff, optimistic.DefaultMaxBackoff), 1000)

// retriesOf is the attempts a call repeated.
func retriesOf(st optimistic.Stats) int { return max(st.Attempts-1, 0) }

var errSoldOut = errors.New("sold out")

// optimisticBuy sells one unit with no lock: read the row, check, write it
// back only if its version did not move, and re-read on a conflict. The
// retries are the lost races.
func optimisticBuy(ctx context.Context, _ sqllock.Locker, s *stock) (sold bool, retries int, err error) {
	// ModifyStats retries conflicts and transient errors itself.
	_, st, err := optimistic.ModifyStats(ctx, s.db, s.cas, s.item, casPolicy, func(r *stockRow) error {
		if r.Units <= 0 {
			return errSoldOut
		}
		s.pause()
		r.Units--
		return nil
	})
	if errors.Is(err, errSoldOut) {
		return false, retriesOf(st), nil
	}
	return err == nil, retriesOf(st), err
}

func unlockedBuy(ctx context.Context, _ sqllock.Locker, s *stock) (bool, int, error) {
	sold, err := s.sell(ctx, s.db)
	return sold, 0, err
}
