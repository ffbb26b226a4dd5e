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
	"github.com/sqllock/sqllock/internal/sqlutil"
	"github.com/sqllock/sqllock/tablelock"
)

// strategy is one way of locking, as the demos and bench use it. A strategy
// plugs in here and nowhere else.
type strategy struct {
	name     string
	dialects []sqllock.Dialect // the dialects that can serve it
	why      string            // why the others cannot
	// newLocker returns a Locker over db and its closer; nil: not built
	// into this binary yet.
	newLocker func(db *sql.DB, d sqllock.Dialect) (sqllock.Locker, func(), error)
	// buy sells one unit of s through l; sold is false once s is empty,
	// retries counts attempts that had to be repeated.
	buy func(ctx context.Context, l sqllock.Locker, s *stock) (sold bool, retries int, err error)
	// raw runs the strategy's statements by hand, for bench; nil: no bench.
	raw func(db *sql.DB, d sqllock.Dialect) (rawLock, error)
	// demoOnly strategies run only when named (--strategy none).
	demoOnly bool
}

var allDialects = []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL, sqllock.SQLite}

// strategies is the table the commands read. rowlock, optimistic and
// advisory are listed as not built yet until their packages land.
var strategies = []strategy{
	{
		name: "tablelock", dialects: allDialects,
		newLocker: func(db *sql.DB, d sqllock.Dialect) (sqllock.Locker, func(), error) {
			l, err := tablelock.New(db, d)
			if err != nil {
				return nil, nil, err
			}
			return l, func() { l.Close() }, nil
		},
		buy: lockedBuy,
		raw: newRawTablelock,
	},
	{
		name: "rowlock", dialects: []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL},
		why: "SQLite has no SELECT ... FOR UPDATE; use tablelock",
	},
	{name: "optimistic", dialects: allDialects},
	{
		name: "advisory", dialects: []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL},
		why: "SQLite has no advisory locks; use tablelock",
	},
	{
		// No lock at all: what the others prevent. Run it with --strategy none.
		name: "none", dialects: allDialects, demoOnly: true,
		newLocker: func(*sql.DB, sqllock.Dialect) (sqllock.Locker, func(), error) { return nil, func() {}, nil },
		buy:       unlockedBuy,
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
	case s.newLocker == nil:
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
}

func newStock(db *sql.DB, d sqllock.Dialect, item string, work time.Duration) *stock {
	s := &stock{db: db, item: item, work: work}
	if d == sqllock.Postgres {
		s.read = `SELECT units FROM sqllock_demo_stock WHERE item = $1`
		s.write = `UPDATE sqllock_demo_stock SET units = $1 WHERE item = $2`
	} else {
		s.read = `SELECT units FROM sqllock_demo_stock WHERE item = ?`
		s.write = `UPDATE sqllock_demo_stock SET units = ? WHERE item = ?`
	}
	return s
}

// createStockTable makes the demo's table; each run uses its own item rows.
func createStockTable(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sqllock_demo_stock (
	item  varchar(200) NOT NULL PRIMARY KEY,
	units integer      NOT NULL
)`)
	return err
}

func (s *stock) units(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.read, s.item).Scan(&n)
	return n, err
}

// sell is the critical section: read the count, pause, write it back less
// one. Without a lock two buyers read the same count and one sale is lost
// from it: the shop sells a unit it does not have.
func (s *stock) sell(ctx context.Context) (bool, error) {
	n, err := s.units(ctx)
	if err != nil || n <= 0 {
		return false, err
	}
	if s.work > 0 {
		time.Sleep(s.work)
	} else {
		runtime.Gosched()
	}
	_, err = s.db.ExecContext(ctx, s.write, n-1, s.item)
	return err == nil, err
}

// lockedBuy sells one unit under the item's lock. Transient database errors
// are retried and counted.
func lockedBuy(ctx context.Context, l sqllock.Locker, s *stock) (sold bool, retries int, err error) {
	for {
		err = sqllock.Do(ctx, l, "sqllock-demo/stock/"+s.item, func(ctx context.Context) error {
			var err error
			sold, err = s.sell(ctx)
			return err
		})
		if err == nil || !sqlutil.IsRetryable(err) || retries >= 100 {
			return sold, retries, err
		}
		retries++
	}
}

func unlockedBuy(ctx context.Context, _ sqllock.Locker, s *stock) (bool, int, error) {
	sold, err := s.sell(ctx)
	return sold, 0, err
}

// rawLock is a strategy's acquire and release statements run by hand.
type rawLock interface {
	// try takes key for owner once, without waiting.
	try(ctx context.Context, key, owner string) (token int64, won bool, err error)
	release(ctx context.Context, key, owner string, token int64) error
	close()
}

// rawTablelock is tablelock's uncontended path written out by hand, each
// statement prepared once: the floor tablelock is measured against.
type rawTablelock struct {
	d        sqllock.Dialect
	db       *sql.DB
	acq, rel *sql.Stmt
	fence    *sql.Stmt // SQLite
}

func newRawTablelock(db *sql.DB, d sqllock.Dialect) (rawLock, error) {
	var acq, rel, fence string
	switch d {
	case sqllock.Postgres:
		acq = `INSERT INTO sqllock_locks AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES ($1, $2, 'raw', 1, nextval('sqllock_fence_seq'), now(), now() + interval '30 seconds')
ON CONFLICT (lock_key) DO UPDATE SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = EXCLUDED.owner,
	acquired_at = now(), expires_at = EXCLUDED.expires_at
WHERE t.expires_at <= now() RETURNING t.token`
		rel = `UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = now() WHERE lock_key = $1 AND owner = $2 AND token = $3`
	case sqllock.MySQL:
		acq = `INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, 'raw', 1, NEXTVAL(sqllock_fence_seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), NEXTVAL(sqllock_fence_seq), token),
	owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)
RETURNING owner, token`
		rel = `UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND owner = ? AND token = ?`
	case sqllock.SQLite:
		const now = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`
		acq = `INSERT INTO sqllock_locks AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?1, ?2, 'raw', 1, (SELECT value + 1 FROM sqllock_fence WHERE id = 1), ` + now + `, ` + now + ` + 30000000)
ON CONFLICT (lock_key) DO UPDATE SET token = excluded.token, hold_count = 1, owner = excluded.owner,
	acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
WHERE t.expires_at <= ` + now + ` RETURNING token`
		rel = `UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = ` + now + ` WHERE lock_key = ?1 AND owner = ?2 AND token = ?3`
		fence = `UPDATE sqllock_fence SET value = MAX(value, ?1) WHERE id = 1`
	default:
		return nil, fmt.Errorf("raw tablelock: %w: %v", sqllock.ErrUnsupported, d)
	}
	r := &rawTablelock{d: d, db: db}
	var err error
	if r.acq, err = db.Prepare(acq); err != nil {
		return nil, err
	}
	if r.rel, err = db.Prepare(rel); err != nil {
		r.close()
		return nil, err
	}
	if fence != "" {
		if r.fence, err = db.Prepare(fence); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *rawTablelock) try(ctx context.Context, key, owner string) (int64, bool, error) {
	var token int64
	switch r.d {
	case sqllock.Postgres:
		err := r.acq.QueryRowContext(ctx, key, owner).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return token, err == nil, err
	case sqllock.MySQL:
		var got string
		err := r.acq.QueryRowContext(ctx, key, owner).Scan(&got, &token)
		if sqlutil.IsDeadlock(err) {
			return 0, false, nil
		}
		return token, err == nil && got == owner, err
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	err = tx.StmtContext(ctx, r.acq).QueryRowContext(ctx, key, owner).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, tx.Commit()
	}
	if err != nil {
		return 0, false, err
	}
	if _, err := tx.StmtContext(ctx, r.fence).ExecContext(ctx, token); err != nil {
		return 0, false, err
	}
	return token, true, tx.Commit()
}

func (r *rawTablelock) release(ctx context.Context, key, owner string, token int64) error {
	_, err := r.rel.ExecContext(ctx, key, owner, token)
	return err
}

func (r *rawTablelock) close() {
	for _, st := range []*sql.Stmt{r.acq, r.rel, r.fence} {
		if st != nil {
			st.Close()
		}
	}
}
