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
	"github.com/sqllock/sqllock/cmd/sqllock/internal/lockers"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/shop"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/optimistic"
	"github.com/sqllock/sqllock/rowlock"
)

// strategy is one way of locking, as the demos and bench pick it. A
// strategy plugs in here, its Locker in package lockers and its
// measurement beside raw SQL in package bench.
type strategy struct {
	name     string
	dialects []sqllock.Dialect // the dialects that can serve it
	why      string            // why the others cannot
	// newLocker returns a Locker over db and its closer; nil for the
	// strategies that sell without one (optimistic, none).
	newLocker lockers.New
	// buy sells one unit of s, through l when the strategy has a Locker;
	// sold is false once s is empty, retries counts attempts that had to
	// be repeated. nil: not built into this binary.
	buy func(ctx context.Context, l sqllock.Locker, s *stock) (sold bool, retries int, err error)
	// forget drops what the strategy keeps per key once a run is done
	// with its keys; nil: nothing, or the package cleans up itself.
	forget func(ctx context.Context, db *sql.DB, d sqllock.Dialect, keys ...string)
	// demoOnly strategies run only when named (--strategy none).
	demoOnly bool
}

var allDialects = []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite, sqllock.MySQL}

// strategies is the table the commands read.
var strategies = []strategy{
	{
		name: "tablelock", dialects: allDialects,
		newLocker: lockers.Tablelock,
		buy:       lockedBuy,
	},
	{
		name: "rowlock", dialects: []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.MySQL},
		why:       "SQLite has no SELECT ... FOR UPDATE; use tablelock",
		newLocker: lockers.Rowlock,
		buy:       rowlockBuy,
		forget:    lockers.ForgetRows,
	},
	{
		name: "optimistic", dialects: allDialects,
		buy: optimisticBuy,
	},
	{
		name: "advisory", dialects: []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.MySQL},
		why:       "SQLite has no advisory locks; use tablelock",
		newLocker: lockers.Advisory,
		buy:       advisoryBuy,
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

func newStock(db *sql.DB, d sqllock.Dialect, item string, work time.Duration, pooler bool) (*stock, error) {
	var opts []optimistic.TableOption
	if pooler {
		opts = append(opts, optimistic.WithTableTransactionPooler())
	}
	cas, err := optimistic.NewTable(d, shop.Table, "item", "version", opts...)
	if err != nil {
		return nil, err
	}
	s := &stock{db: db, item: item, work: work, cas: cas, pooler: pooler}
	// The locked writes bump the version too, so that an optimistic writer
	// of the same row would see them.
	if dialect.Of(d).NumberedParams {
		s.read = `SELECT units FROM sqllock_demo_stock WHERE item = $1`
		s.write = `UPDATE sqllock_demo_stock SET units = $1, version = version + 1 WHERE item = $2`
	} else {
		s.read = `SELECT units FROM sqllock_demo_stock WHERE item = ?`
		s.write = `UPDATE sqllock_demo_stock SET units = ?, version = version + 1 WHERE item = ?`
	}
	return s, nil
}

func (s *stock) close() { s.cas.Close() }

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
		if err == nil || !dberr.IsRetryable(err) || dberr.IsConnLoss(err) || retries >= 100 {
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

var errSoldOut = errors.New("sold out")

// optimisticBuy sells one unit with no lock: read the row, check, write it
// back only if its version did not move, and re-read on a conflict. The
// retries are the lost races.
func optimisticBuy(ctx context.Context, _ sqllock.Locker, s *stock) (sold bool, retries int, err error) {
	// ModifyStats retries conflicts and transient errors itself.
	_, st, err := optimistic.ModifyStats(ctx, s.db, s.cas, s.item, shop.CASPolicy, func(r *shop.Row) error {
		if r.Units <= 0 {
			return errSoldOut
		}
		s.pause()
		r.Units--
		return nil
	})
	if errors.Is(err, errSoldOut) {
		return false, shop.Retries(st), nil
	}
	return err == nil, shop.Retries(st), err
}

func unlockedBuy(ctx context.Context, _ sqllock.Locker, s *stock) (bool, int, error) {
	sold, err := s.sell(ctx, s.db)
	return sold, 0, err
}
