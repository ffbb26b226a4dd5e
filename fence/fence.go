package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// DefaultTable is the fence table migration 00005 creates.
const DefaultTable = "sqllock_fence_tokens"

// writeAttempts bounds Write's retries of a transient failure of the check.
const writeAttempts = 5

// Querier runs the fence's statements: normally the *sql.Tx of the write
// the check guards (or the sqlx types that wrap one). A *sql.DB or
// *sql.Conn outside a transaction commits the check on its own, and then
// it guards nothing that comes after it.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Option configures a Fence.
type Option func(*config) error

type config struct {
	table string
}

// WithTable names the fence table (default DefaultTable), optionally
// schema-qualified. The name is validated as an identifier and quoted; the
// table must have the columns of the shipped one (see Schema).
func WithTable(name string) Option {
	return func(c *config) error {
		c.table = name
		return nil
	}
}

// Fence checks fencing tokens against a fence table. It holds no
// connection and no state beyond its statements: safe for concurrent use,
// and cheap to keep in a package variable.
type Fence struct {
	dialect sqllock.Dialect
	table   string
	q       queries
}

type queries struct {
	check string // upsert the token unless a larger one is recorded
	last  string // read the recorded token
	lock  string // MySQL: read it with the row lock the check took
}

// New returns a Fence for dialect d. It checks its options but does not
// touch the database; run migrations.Up (or CreateTable) first.
func New(d sqllock.Dialect, opts ...Option) (*Fence, error) {
	cfg := config{table: DefaultTable}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("fence: %w", err)
		}
	}
	t, err := sqlutil.QuoteIdent(d, cfg.table)
	if err != nil {
		return nil, fmt.Errorf("fence: table: %w", err)
	}
	f := &Fence{dialect: d, table: cfg.table}
	switch d {
	case sqllock.Postgres:
		f.q = queries{
			check: `INSERT INTO ` + t + ` AS f (resource, last_token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token
WHERE f.last_token <= EXCLUDED.last_token`,
			last: `SELECT last_token FROM ` + t + ` WHERE resource = $1`,
		}
	case sqllock.MySQL:
		// ON DUPLICATE KEY UPDATE has no WHERE: GREATEST leaves a larger
		// recorded token in place, and the affected-row count (2: raised)
		// or the locked row tells the outcome.
		f.q = queries{
			check: `INSERT INTO ` + t + ` (resource, last_token) VALUES (?, ?)
ON DUPLICATE KEY UPDATE last_token = GREATEST(last_token, VALUES(last_token))`,
			last: `SELECT last_token FROM ` + t + ` WHERE resource = ?`,
			lock: `SELECT last_token FROM ` + t + ` WHERE resource = ? FOR UPDATE`,
		}
	case sqllock.SQLite:
		f.q = queries{
			check: `INSERT INTO ` + t + ` (resource, last_token) VALUES (?1, ?2)
ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token
WHERE last_token <= excluded.last_token`,
			last: `SELECT last_token FROM ` + t + ` WHERE resource = ?1`,
		}
	}
	return f, nil
}

// Table returns the fence table's name, as given.
func (f *Fence) Table() string { return f.table }

// Check records token as the latest applied to resource, in q's
// transaction, unless a larger token is recorded already; then it returns an
// error matching sqllock.ErrStaleToken that names both tokens, and the
// caller must not write (roll back). A token equal to the recorded one is
// accepted. The first check of a resource creates its row.
//
// Run Check before the write it guards, in the same transaction: the row
// lock it takes keeps every other fenced writer of resource waiting until
// the transaction ends, and a rollback undoes the check with the write.
// A database error (a deadlock, a serialization failure) is returned
// wrapped; it has aborted the statement and perhaps the transaction.
func (f *Fence) Check(ctx context.Context, q Querier, resource string, token int64) error {
	if err := f.validate(q, resource, token); err != nil {
		return err
	}
	res, err := q.ExecContext(ctx, f.q.check, resource, token)
	if err != nil {
		return fmt.Errorf("fence: check %q (token %d): %w", resource, token, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: check %q (token %d): %w", resource, token, err)
	}
	if f.dialect == sqllock.MySQL {
		if n == 2 { // an existing row, raised to token
			return nil
		}
		// Inserted (1), or left as it was (0; 1 with CLIENT_FOUND_ROWS):
		// the row, locked by the upsert, says which.
		var last int64
		if err := q.QueryRowContext(ctx, f.q.lock, resource).Scan(&last); err != nil {
			return fmt.Errorf("fence: check %q (token %d): %w", resource, token, err)
		}
		if last == token {
			return nil
		}
		return stale(resource, token, last)
	}
	if n == 1 {
		return nil
	}
	// Refused. Read the newer token for the message only: at PostgreSQL's
	// snapshot isolation levels it may be older than the one that refused.
	var last int64
	if err := q.QueryRowContext(ctx, f.q.last, resource).Scan(&last); err != nil {
		return errors.Join(stale(resource, token, -1), err)
	}
	return stale(resource, token, last)
}

func stale(resource string, token, last int64) error {
	if last < 0 {
		return fmt.Errorf("fence: %q: %w: token %d is older than one already applied", resource, sqllock.ErrStaleToken, token)
	}
	return fmt.Errorf("fence: %q: %w: token %d is older than %d, already applied", resource, sqllock.ErrStaleToken, token, last)
}

func (f *Fence) validate(q Querier, resource string, token int64) error {
	if err := sqllock.ValidateKey(resource); err != nil {
		return fmt.Errorf("fence: resource %q: %w", resource, err)
	}
	if token <= 0 {
		return fmt.Errorf("fence: %q: %w: token %d is not a fencing token (they start at 1)", resource, sqllock.ErrInvalidOption, token)
	}
	if q == nil {
		return fmt.Errorf("fence: %q: %w: nil Querier", resource, sqllock.ErrInvalidOption)
	}
	return nil
}

// Guard is Check with the token of the lease in ctx: the lease that
// sqllock.Do, DoAll or DoLease put there, so the token travels with the
// context instead of through every layer's arguments. A lease that has
// already ended is refused before the database is asked, with an error
// matching its Err (sqllock.ErrLockLost after a loss). Without a lease in
// ctx Guard returns an error matching sqllock.ErrNotHeld.
func (f *Fence) Guard(ctx context.Context, q Querier, resource string) error {
	lease, ok := sqllock.LeaseFrom(ctx)
	if !ok {
		return fmt.Errorf("fence: guard %q: %w: no lease in the context (call it inside sqllock.Do, DoAll or DoLease)", resource, sqllock.ErrNotHeld)
	}
	if err := lease.Err(); err != nil {
		return fmt.Errorf("fence: guard %q (token %d): %w", resource, lease.Token(), err)
	}
	return f.Check(ctx, q, resource, lease.Token())
}

// Write runs fn in a new transaction on db, after Guard admitted the lease
// in ctx for resource, and commits: the check and fn's writes take effect
// together or not at all. A stale token, an ended lease or fn's error rolls
// back and is returned as it is. A transient failure of the check (a
// deadlock, a serialization failure, SQLITE_BUSY) is retried a few times
// before fn runs; fn itself runs at most once.
func (f *Fence) Write(ctx context.Context, db *sql.DB, resource string, fn func(tx *sql.Tx) error) error {
	if db == nil || fn == nil {
		return fmt.Errorf("fence: write %q: %w: nil *sql.DB or function", resource, sqllock.ErrInvalidOption)
	}
	for attempt := 1; ; attempt++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("fence: write %q: %w", resource, err)
		}
		if err := f.Guard(ctx, tx, resource); err != nil {
			_ = tx.Rollback()
			if attempt < writeAttempts && sqlutil.IsRetryable(err) && !errors.Is(err, sqllock.ErrStaleToken) && ctx.Err() == nil {
				if err := sleep(ctx, attempt); err != nil {
					return fmt.Errorf("fence: write %q: %w", resource, err)
				}
				continue
			}
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("fence: write %q: commit: %w", resource, err)
		}
		return nil
	}
}

// sleep backs off with jitter before retry attempt+1.
func sleep(ctx context.Context, attempt int) error {
	d := time.Duration(attempt) * time.Millisecond
	t := time.NewTimer(d + rand.N(d*4))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Last returns the largest token applied to resource, 0 if none has been.
func (f *Fence) Last(ctx context.Context, q Querier, resource string) (int64, error) {
	if err := sqllock.ValidateKey(resource); err != nil {
		return 0, fmt.Errorf("fence: resource %q: %w", resource, err)
	}
	if q == nil {
		return 0, fmt.Errorf("fence: %q: %w: nil Querier", resource, sqllock.ErrInvalidOption)
	}
	var last int64
	err := q.QueryRowContext(ctx, f.q.last, resource).Scan(&last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("fence: last %q: %w", resource, err)
	}
	return last, nil
}
