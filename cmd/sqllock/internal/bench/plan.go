package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/lockers"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/shop"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/optimistic"
	"github.com/sqllock/sqllock/tablelock"
)

// benchPlan is what bench measures for one strategy: the library beside
// the raw SQL of the same operation.
type benchPlan struct {
	lib, raw side
	op       string // one operation, as the table names it
	rawSQL   string // what the raw side runs
	// noHandoff says why the strategy has no handoff to time; empty when
	// it has one.
	noHandoff string
	// close drops what the plan made: statements, rows. nil: nothing.
	close func()
}

// side is the library or the raw SQL in a bench.
type side struct {
	// open returns a new client with its own state (a Locker, a pinned
	// session), as a separate service would have.
	open func(ctx context.Context) (contender, error)
	// prepare readies a key before its first use; nil: nothing to do.
	prepare func(ctx context.Context, key string) error
	// retries counts attempts repeated after a lost race; nil where clients
	// wait their turn instead.
	retries *atomic.Int64
}

// contender is one client of a bench side. It holds at most one key at a
// time and is used by one goroutine at a time.
type contender interface {
	// acquire takes key, waiting its turn until ctx ends.
	acquire(ctx context.Context, key string) error
	// release gives the key back.
	release(ctx context.Context) error
	close()
}

// fairTablelock is a tablelock Locker in fair order (the hot key of the
// multi-client cases).
func fairTablelock(db *sql.DB, d sqllock.Dialect, _ lockers.Opts) (sqllock.Locker, func(), error) {
	l, err := tablelock.New(db, d, tablelock.WithFairness(true))
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// untokenedAdvisory is an advisory Locker that draws no fencing token
// (advisory.WithoutToken), measured beside the default.
func untokenedAdvisory(db *sql.DB, d sqllock.Dialect, _ lockers.Opts) (sqllock.Locker, func(), error) {
	l, err := advisory.New(db, d, advisory.WithoutToken())
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// lockerSide is the library side of a strategy with a Locker: one Locker
// per client, made for a transaction pooler with pooler.
func lockerSide(db *sql.DB, d sqllock.Dialect, pooler bool, newLocker lockers.New) side {
	return side{open: func(context.Context) (contender, error) {
		return newLockerClient(db, d, pooler, newLocker)
	}}
}

func newLockerClient(db *sql.DB, d sqllock.Dialect, pooler bool, newLocker lockers.New) (contender, error) {
	l, closeFn, err := newLocker(db, d, lockers.Opts{Pooler: pooler})
	if err != nil {
		return nil, err
	}
	return &lockerClient{l: l, closeFn: closeFn}, nil
}

type lockerClient struct {
	l       sqllock.Locker
	lease   sqllock.Lease
	closeFn func()
}

func (c *lockerClient) acquire(ctx context.Context, key string) error {
	lease, err := c.l.Acquire(ctx, key)
	if err != nil {
		return err
	}
	c.lease = lease
	return nil
}

func (c *lockerClient) release(ctx context.Context) error {
	lease := c.lease
	c.lease = nil
	return lease.Release(ctx)
}

func (c *lockerClient) close() {
	if c.lease != nil {
		c.lease.Release(context.Background())
	}
	c.closeFn()
}

// rawStmt is a statement of a raw side: prepared once, or, behind a
// transaction pooler, its text run unprepared each time. A prepared
// statement lives on one server session, which the proxy hands from client
// to client: the next turn may not have it, or have another client's of
// the same name.
type rawStmt struct {
	db *sql.DB
	q  string
	st *sql.Stmt // nil: unprepared
}

func prepareRaw(ctx context.Context, db *sql.DB, q string, unprepared bool) (*rawStmt, error) {
	if unprepared {
		return &rawStmt{db: db, q: q}, nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &rawStmt{db: db, q: q, st: st}, nil
}

// queryRow runs s in tx, or on its pool when tx is nil.
func (s *rawStmt) queryRow(ctx context.Context, tx *sql.Tx, args ...any) *sql.Row {
	switch {
	case s.st == nil && tx != nil:
		return tx.QueryRowContext(ctx, s.q, args...)
	case s.st == nil:
		return s.db.QueryRowContext(ctx, s.q, args...)
	case tx != nil:
		return tx.StmtContext(ctx, s.st).QueryRowContext(ctx, args...)
	}
	return s.st.QueryRowContext(ctx, args...)
}

// exec runs s in tx, or on its pool when tx is nil.
func (s *rawStmt) exec(ctx context.Context, tx *sql.Tx, args ...any) (sql.Result, error) {
	switch {
	case s.st == nil && tx != nil:
		return tx.ExecContext(ctx, s.q, args...)
	case s.st == nil:
		return s.db.ExecContext(ctx, s.q, args...)
	case tx != nil:
		return tx.StmtContext(ctx, s.st).ExecContext(ctx, args...)
	}
	return s.st.ExecContext(ctx, args...)
}

// closeRaw closes the prepared statements of ss; nil ones are skipped.
func closeRaw(ss ...*rawStmt) {
	for _, s := range ss {
		if s != nil && s.st != nil {
			s.st.Close()
		}
	}
}

// preparedOnce says how a raw side runs its statements, for its line.
func preparedOnce(pooler bool) string {
	if pooler {
		return "unprepared (transaction pooler)"
	}
	return "prepared once"
}

// benchTablelock sets tablelock beside its own statements run by hand.
func benchTablelock(ctx context.Context, db *sql.DB, d sqllock.Dialect, pooler bool) (*benchPlan, error) {
	r, err := newRawTablelock(ctx, db, d, pooler)
	if err != nil {
		return nil, err
	}
	return &benchPlan{
		lib: lockerSide(db, d, pooler, lockers.Tablelock),
		raw: side{open: func(context.Context) (contender, error) {
			return &rawTablelockClient{r: r, owner: identity.NewOwner()}, nil
		}},
		op:     "acquire+release",
		rawSQL: "tablelock's statements by hand, " + preparedOnce(pooler) + "; waiters retry at once, without sleeping",
		close:  r.close,
	}, nil
}

// rawTablelockClient takes keys through the shared raw statements as one
// owner. A lock table has no server-side wait, so it polls: the fastest a
// hand-written waiter can be, at the cost of a busy loop.
type rawTablelockClient struct {
	r     *rawTablelock
	owner string
	key   string
	token int64
}

func (c *rawTablelockClient) acquire(ctx context.Context, key string) error {
	for {
		token, won, err := c.r.try(ctx, key, c.owner)
		if err != nil {
			return err
		}
		if won {
			c.key, c.token = key, token
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (c *rawTablelockClient) release(ctx context.Context) error {
	return c.r.release(context.WithoutCancel(ctx), c.key, c.owner, c.token)
}

func (c *rawTablelockClient) close() {}

// rawTablelock is tablelock's uncontended path written out by hand, each
// statement prepared once (but behind a transaction pooler): the floor
// tablelock is measured against.
type rawTablelock struct {
	d        sqllock.Dialect
	db       *sql.DB
	acq, rel *rawStmt
	fence    *rawStmt // SQLite
	free     *rawStmt // the take of a free row, tried first (PostgreSQL, MariaDB)
}

// rawTablelockSQL is the text of rawTablelock's statements on one dialect;
// fence and free are empty where it runs none.
type rawTablelockSQL struct{ acq, free, rel, fence string }

// rawTablelockStatements returns rawTablelock's statements on d.
func rawTablelockStatements(d sqllock.Dialect) (rawTablelockSQL, error) {
	var acq, rel, fence, free string
	switch d {
	case sqllock.Postgres:
		acq = `INSERT INTO sqllock_locks AS t (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES ($1, $2, 'raw', 1, nextval('sqllock_fence_seq'), now(), now() + interval '30 seconds')
ON CONFLICT (lock_key) DO UPDATE SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = EXCLUDED.owner,
	acquired_at = now(), expires_at = EXCLUDED.expires_at
WHERE t.expires_at <= now() RETURNING t.token`
		// As tablelock: a free row is taken by an update first.
		free = `UPDATE sqllock_locks SET token = nextval('sqllock_fence_seq'), hold_count = 1, owner = $2, host = 'raw',
	acquired_at = now(), expires_at = now() + interval '30 seconds'
WHERE lock_key = $1 AND expires_at <= now() RETURNING token`
		rel = `UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = now()
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS sc WHERE lock_key = $1 AND owner = $2 AND token = $3`
	case sqllock.MariaDB:
		acq = `INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, 'raw', 1, NEXTVAL(sqllock_fence_seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), NEXTVAL(sqllock_fence_seq), token),
	owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)
RETURNING owner, token`
		// As tablelock: a free row is taken by an update first, its
		// token brought back as LAST_INSERT_ID.
		free = `UPDATE sqllock_locks SET token = LAST_INSERT_ID(NEXTVAL(sqllock_fence_seq)), hold_count = 1,
	acquired_at = UTC_TIMESTAMP(6), host = 'raw', owner = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND
WHERE lock_key = ? AND expires_at <= UTC_TIMESTAMP(6)`
		rel = `UPDATE sqllock_locks SET hold_count = 0, owner = '', expires_at = UTC_TIMESTAMP(6) WHERE lock_key = ? AND owner = ? AND token = ?`
	case sqllock.MySQL:
		// No RETURNING: LAST_INSERT_ID carries the token, 0 when refused.
		acq = `INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at)
VALUES (?, ?, 'raw', 1, LAST_INSERT_ID(sqllock_next_token()), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)
ON DUPLICATE KEY UPDATE token = IF(expires_at <= UTC_TIMESTAMP(6), LAST_INSERT_ID(sqllock_next_token()), token + LAST_INSERT_ID(0)),
	owner = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)`
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
		return rawTablelockSQL{}, fmt.Errorf("raw tablelock: %w: %v", sqllock.ErrUnsupported, d)
	}
	return rawTablelockSQL{acq: acq, free: free, rel: rel, fence: fence}, nil
}

func newRawTablelock(ctx context.Context, db *sql.DB, d sqllock.Dialect, unprepared bool) (*rawTablelock, error) {
	q, err := rawTablelockStatements(d)
	if err != nil {
		return nil, err
	}
	r := &rawTablelock{d: d, db: db}
	for _, p := range []struct {
		q  string
		st **rawStmt
	}{{q.acq, &r.acq}, {q.rel, &r.rel}, {q.fence, &r.fence}, {q.free, &r.free}} {
		if p.q == "" {
			continue
		}
		if *p.st, err = prepareRaw(ctx, db, p.q, unprepared); err != nil {
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
		err := r.free.queryRow(ctx, nil, key, owner).Scan(&token)
		if !errors.Is(err, sql.ErrNoRows) {
			return token, err == nil, err
		}
		err = r.acq.queryRow(ctx, nil, key, owner).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return token, err == nil, err
	case sqllock.MariaDB:
		res, err := r.free.exec(ctx, nil, owner, key)
		if err != nil {
			return 0, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			if err == nil {
				token, err = res.LastInsertId()
			}
			return token, err == nil, err
		}
		var got string
		err = r.acq.queryRow(ctx, nil, key, owner).Scan(&got, &token)
		if dberr.IsDeadlock(err) {
			return 0, false, nil
		}
		return token, err == nil && got == owner, err
	case sqllock.MySQL:
		res, err := r.acq.exec(ctx, nil, key, owner)
		if dberr.IsDeadlock(err) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		token, err = res.LastInsertId()
		return token, err == nil && token > 0, err
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	err = r.acq.queryRow(ctx, tx, key, owner).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, tx.Commit()
	}
	if err != nil {
		return 0, false, err
	}
	if _, err := r.fence.exec(ctx, tx, token); err != nil {
		return 0, false, err
	}
	return token, true, tx.Commit()
}

func (r *rawTablelock) release(ctx context.Context, key, owner string, token int64) error {
	_, err := r.rel.exec(ctx, nil, key, owner, token)
	return err
}

func (r *rawTablelock) close() { closeRaw(r.acq, r.rel, r.fence, r.free) }

// rawRowlockStatements returns the bare row lock's statements on d: the
// locking read and the insert of a missing row.
func rawRowlockStatements(d sqllock.Dialect) (lock, ensure string) {
	if d.IsMySQL() {
		return `SELECT 1 FROM sqllock_rows WHERE lock_key = ? FOR UPDATE`,
			`INSERT IGNORE INTO sqllock_rows (lock_key) VALUES (?)`
	}
	return `SELECT 1 FROM sqllock_rows WHERE lock_key = $1 FOR UPDATE`,
		`INSERT INTO sqllock_rows (lock_key) VALUES ($1) ON CONFLICT DO NOTHING`
}

// benchRowlock sets rowlock beside a bare row lock in a transaction, as
// rowlock's BenchmarkAcquireRelease does.
func benchRowlock(ctx context.Context, db *sql.DB, d sqllock.Dialect, pooler bool) (*benchPlan, error) {
	lock, ensure := rawRowlockStatements(d)
	st, err := prepareRaw(ctx, db, lock, pooler)
	if err != nil {
		return nil, err
	}
	// Both sides leave a row per key; prepare runs on the bench's
	// goroutine only.
	var keys []string
	lib := lockerSide(db, d, pooler, lockers.Rowlock)
	lib.prepare = func(_ context.Context, key string) error {
		keys = append(keys, key)
		return nil
	}
	return &benchPlan{
		lib: lib,
		raw: side{
			open: func(context.Context) (contender, error) { return &rawTxClient{db: db, lock: st}, nil },
			// The raw lock needs its row: the floor is the lock, not the insert.
			prepare: func(ctx context.Context, key string) error {
				keys = append(keys, key)
				_, err := db.ExecContext(ctx, ensure, key)
				return err
			},
		},
		op:     "acquire+release",
		rawSQL: "BEGIN; SELECT ... FOR UPDATE; COMMIT on an existing row, " + preparedOnce(pooler) + "; waiters queue in the server",
		close: func() {
			closeRaw(st)
			lockers.ForgetRows(context.Background(), db, d, keys...)
		},
	}, nil
}

// rawTxClient holds a key by a lock statement in its own transaction (a
// row lock, or a transaction-level advisory lock), until the commit.
type rawTxClient struct {
	db   *sql.DB
	lock *rawStmt // takes the key given as its one argument, or fails
	arg  func(key string) any
	tx   *sql.Tx
}

func (c *rawTxClient) acquire(ctx context.Context, key string) error {
	// database/sql rolls a transaction back when its context ends; this one
	// must outlive the wait that took it.
	tx, err := c.db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return err
	}
	var arg any = key
	if c.arg != nil {
		arg = c.arg(key)
	}
	var ignored any
	if err := c.lock.queryRow(ctx, tx, arg).Scan(&ignored); err != nil {
		tx.Rollback()
		return err
	}
	c.tx = tx
	return nil
}

func (c *rawTxClient) release(context.Context) error {
	tx := c.tx
	c.tx = nil
	return tx.Commit()
}

func (c *rawTxClient) close() {
	if c.tx != nil {
		c.tx.Rollback()
	}
}

// benchAdvisory sets advisory beside the blocking lock functions on a
// pinned connection, as advisory's benchmarks do. Behind a transaction
// pooler, where a session lock would stay on a server session the proxy
// hands to other clients, both sides lock in a transaction instead: the
// Locker's AcquireTx beside pg_advisory_xact_lock, each ended by COMMIT.
func benchAdvisory(_ context.Context, db *sql.DB, d sqllock.Dialect, pooler bool) (*benchPlan, error) {
	q, rawSQL := rawAdvisorySQL(d)
	if pooler {
		return &benchPlan{
			lib: side{open: func(context.Context) (contender, error) { return newAdvisoryTxClient(db, d) }},
			raw: side{open: func(context.Context) (contender, error) { return newRawAdvisoryTx(db, q) }},
			op:  "AcquireTx+COMMIT",
			rawSQL: "BEGIN; " + q.lockTx + "; COMMIT, " + preparedOnce(pooler) +
				"; waiters block in the server (session locks would stay on the proxy's server sessions)",
		}, nil
	}
	return &benchPlan{
		lib: lockerSide(db, d, false, lockers.Advisory),
		raw: side{open: func(ctx context.Context) (contender, error) { return openRawAdvisory(ctx, db, d, q) }},
		op:  "acquire+release",
		// The same lock ids as the Locker's, so the server does the same work.
		rawSQL: rawSQL + " on one pinned connection per client, prepared once; waiters block in the server",
	}, nil
}

// rawAdvisorySQL is the blocking lock functions of d, on the Locker's lock
// ids, and their name for the report.
func rawAdvisorySQL(d sqllock.Dialect) (advisorySQL, string) {
	if d.IsMySQL() {
		// A bounded wait, repeated: MariaDB answers GET_LOCK(name, -1) with NULL.
		// Both paths lock the key's case-safe name, as the Locker does.
		return advisorySQL{
			lock: `SELECT GET_LOCK(?, 60)`, unlock: `SELECT RELEASE_LOCK(?)`, unlockAll: `SELECT RELEASE_ALL_LOCKS()`,
			arg: func(key string) any { return advisory.MySQLName(advisory.DefaultNamespace, key) },
		}, "GET_LOCK/RELEASE_LOCK"
	}
	return advisorySQL{
		lock: `SELECT pg_advisory_lock($1)`, unlock: `SELECT pg_advisory_unlock($1)`, unlockAll: `SELECT pg_advisory_unlock_all()`,
		lockTx: `SELECT pg_advisory_xact_lock($1)`,
		arg:    func(key string) any { return advisory.PostgresKey(advisory.DefaultNamespace, key) },
	}, "pg_advisory_lock/pg_advisory_unlock"
}

type advisorySQL struct {
	lock, unlock, unlockAll string
	// lockTx takes the lock until the transaction ends; "" where the
	// server has no such lock (MySQL).
	lockTx string
	arg    func(key string) any // the server-side lock id or name
}

// rawAdvisory holds keys as advisory locks of one pinned session.
type rawAdvisory struct {
	d            sqllock.Dialect
	q            advisorySQL
	conn         *sql.Conn
	lock, unlock *sql.Stmt
	arg          any
}

func openRawAdvisory(ctx context.Context, db *sql.DB, d sqllock.Dialect, q advisorySQL) (*rawAdvisory, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := &rawAdvisory{d: d, q: q, conn: conn}
	if c.lock, err = conn.PrepareContext(ctx, q.lock); err == nil {
		c.unlock, err = conn.PrepareContext(ctx, q.unlock)
	}
	if err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *rawAdvisory) acquire(ctx context.Context, key string) error {
	arg := c.q.arg(key)
	for {
		if c.d == sqllock.Postgres {
			var void any
			if err := c.lock.QueryRowContext(ctx, arg).Scan(&void); err != nil {
				return err
			}
			break
		}
		var got sql.NullInt64
		if err := c.lock.QueryRowContext(ctx, arg).Scan(&got); err != nil {
			return err
		}
		if !got.Valid {
			return fmt.Errorf("GET_LOCK(%q) returned NULL", arg)
		}
		if got.Int64 == 1 {
			break
		}
		if err := ctx.Err(); err != nil { // 0: timed out, still held elsewhere
			return err
		}
	}
	c.arg = arg
	return nil
}

func (c *rawAdvisory) release(ctx context.Context) error {
	var ok sql.NullBool
	// An unlock must not be abandoned halfway: the lock would stay on the session.
	if err := c.unlock.QueryRowContext(context.WithoutCancel(ctx), c.arg).Scan(&ok); err != nil {
		return err
	}
	if !ok.Bool {
		return fmt.Errorf("raw unlock of %v: not held", c.arg)
	}
	return nil
}

func (c *rawAdvisory) close() {
	for _, st := range []*sql.Stmt{c.lock, c.unlock} {
		if st != nil {
			st.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockers.CleanupTimeout)
	defer cancel()
	// A session that cannot show it holds nothing must not go back to the
	// pool, where its locks would be stranded.
	if _, err := c.conn.ExecContext(ctx, c.q.unlockAll); err != nil {
		c.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	c.conn.Close()
}

// newRawAdvisoryTx is a raw client that holds a key by q.lockTx in a
// transaction of db, unprepared: the raw form that works through a
// transaction pooler.
func newRawAdvisoryTx(db *sql.DB, q advisorySQL) (contender, error) {
	if q.lockTx == "" {
		return nil, fmt.Errorf("raw advisory lock in a transaction: %w: no transaction-level advisory lock", sqllock.ErrUnsupported)
	}
	return &rawTxClient{db: db, lock: &rawStmt{db: db, q: q.lockTx}, arg: q.arg}, nil
}

// advisoryTxClient holds a key by the advisory Locker's transaction-level
// form (AcquireTx), the one a Locker made for a transaction pooler serves;
// release commits.
type advisoryTxClient struct {
	db      *sql.DB
	l       *advisory.Locker
	closeFn func()
	tx      *sql.Tx
}

func newAdvisoryTxClient(db *sql.DB, d sqllock.Dialect) (contender, error) {
	l, closeFn, err := lockers.Advisory(db, d, lockers.Opts{Pooler: true})
	if err != nil {
		return nil, err
	}
	return &advisoryTxClient{db: db, l: l.(*advisory.Locker), closeFn: closeFn}, nil
}

func (c *advisoryTxClient) acquire(ctx context.Context, key string) error {
	// The transaction must outlive the wait that took the lock.
	tx, err := c.db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return err
	}
	if _, err := c.l.AcquireTx(ctx, tx, key); err != nil {
		tx.Rollback()
		return err
	}
	c.tx = tx
	return nil
}

func (c *advisoryTxClient) release(context.Context) error {
	tx := c.tx
	c.tx = nil
	return tx.Commit()
}

func (c *advisoryTxClient) close() {
	if c.tx != nil {
		c.tx.Rollback()
	}
	c.closeFn()
}

// rawCASStatements returns the hand-written compare-and-swap on the demo
// table: the read, and the write guarded by the version read.
func rawCASStatements(d sqllock.Dialect) (read, write string) {
	if d == sqllock.Postgres {
		return `SELECT units, version FROM sqllock_demo_stock WHERE item = $1`,
			`UPDATE sqllock_demo_stock SET units = $1, version = version + 1 WHERE item = $2 AND version = $3`
	}
	return `SELECT units, version FROM sqllock_demo_stock WHERE item = ?`,
		`UPDATE sqllock_demo_stock SET units = ?, version = version + 1 WHERE item = ? AND version = ?`
}

// benchOptimistic measures a write that needs no lock: read a row of the
// demo table, bump its count, write it back only if its version did not
// move. The library side is optimistic.Modify, as the demo sells through it.
func benchOptimistic(ctx context.Context, db *sql.DB, d sqllock.Dialect, pooler bool) (*benchPlan, error) {
	if err := shop.CreateTable(ctx, db); err != nil {
		return nil, fmt.Errorf("creating the demo table: %v", err)
	}
	read, write := rawCASStatements(d)
	var opts []optimistic.TableOption
	if pooler {
		opts = append(opts, optimistic.WithTableTransactionPooler())
	}
	t, err := optimistic.NewTable(d, shop.Table, "item", "version", opts...)
	if err != nil {
		return nil, err
	}
	r := &rawCAS{retries: new(atomic.Int64)}
	if r.read, err = prepareRaw(ctx, db, read, pooler); err == nil {
		r.write, err = prepareRaw(ctx, db, write, pooler)
	}
	closeAll := func() {
		t.Close()
		closeRaw(r.read, r.write)
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	var items []string // prepare runs on the bench's goroutine only
	prepare := func(ctx context.Context, key string) error {
		items = append(items, key)
		return shop.InsertRow(ctx, db, d, key, 0)
	}
	libRetries := new(atomic.Int64)
	return &benchPlan{
		lib: side{
			// One Table for all clients, as one service has: Modify queues
			// this process's writers of a row instead of letting them race.
			open:    func(context.Context) (contender, error) { return &casClient{db: db, t: t, retries: libRetries}, nil },
			prepare: prepare, retries: libRetries,
		},
		raw: side{
			open:    func(context.Context) (contender, error) { return r, nil },
			prepare: prepare, retries: r.retries,
		},
		op:        "read + CAS write",
		rawSQL:    "SELECT, then UPDATE ... WHERE version = ?, " + preparedOnce(pooler) + "; a lost race re-reads at once",
		noHandoff: "optimistic writers never wait for each other; a loser re-reads and writes again",
		close: func() {
			closeAll()
			ctx, cancel := context.WithTimeout(context.Background(), lockers.CleanupTimeout)
			defer cancel()
			for _, item := range items {
				shop.DeleteRow(ctx, db, d, item)
			}
		},
	}, nil
}

// casClient bumps a row through optimistic.Modify; release has nothing to
// give back.
type casClient struct {
	db      *sql.DB
	t       *optimistic.Table
	retries *atomic.Int64
}

func (c *casClient) acquire(ctx context.Context, key string) error {
	_, st, err := optimistic.ModifyStats(ctx, c.db, c.t, key, shop.CASPolicy, func(r *shop.Row) error {
		r.Units++
		return nil
	})
	c.retries.Add(int64(shop.Retries(st)))
	return err
}

func (*casClient) release(context.Context) error { return nil }
func (*casClient) close()                        {}

// rawCAS is the compare-and-swap written out: read the version, write
// where it is unchanged, read again at once when another writer won. Its
// statements are shared and safe for concurrent use, so one value serves
// every client.
type rawCAS struct {
	read, write *rawStmt
	retries     *atomic.Int64
}

func (c *rawCAS) acquire(ctx context.Context, key string) error {
	for {
		var units, version int64
		if err := c.read.queryRow(ctx, nil, key).Scan(&units, &version); err != nil {
			return err
		}
		res, err := c.write.exec(ctx, nil, units+1, key, version)
		if err != nil && !dberr.IsRetryable(err) {
			return err
		}
		if err == nil {
			n, err := res.RowsAffected()
			if err != nil || n == 1 {
				return err
			}
		}
		c.retries.Add(1)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (*rawCAS) release(context.Context) error { return nil }
func (*rawCAS) close()                        {}
