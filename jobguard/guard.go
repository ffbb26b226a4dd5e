package jobguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// DefaultTable is the table migration 00004 creates.
const DefaultTable = "sqllock_jobs"

// MinAtMost is the shortest hold-at-most accepted: a shorter one could pass
// before the statement that takes the row has returned.
const MinAtMost = 10 * time.Millisecond

// releaseTimeout bounds Release and the give-back of a cancelled try,
// which run detached from the caller's context.
const releaseTimeout = 5 * time.Second

// tryTimeout bounds the statement of a try, which runs detached from the
// caller's context (see Guard.tryDetached).
const tryTimeout = 5 * time.Second

// Job names a scheduled job and bounds how long its row stays taken.
type Job struct {
	// Name identifies the job across replicas: a valid sqllock key.
	Name string
	// AtMost is how long a run holds the job at most; a crashed runner frees
	// it then. The run's context is cancelled AtMost/10 earlier.
	AtMost time.Duration
	// AtLeast is how long after it started a run keeps the job, even when it
	// finished sooner (0: free at once). At most AtMost.
	AtLeast time.Duration
}

func (j Job) validate() error {
	if err := sqllock.ValidateKey(j.Name); err != nil {
		return err
	}
	switch {
	case j.AtMost < MinAtMost:
		return fmt.Errorf("%w: AtMost %v is below the minimum %v", sqllock.ErrInvalidOption, j.AtMost, MinAtMost)
	case j.AtLeast < 0:
		return fmt.Errorf("%w: AtLeast %v is negative", sqllock.ErrInvalidOption, j.AtLeast)
	case j.AtLeast > j.AtMost:
		return fmt.Errorf("%w: AtLeast %v exceeds AtMost %v", sqllock.ErrInvalidOption, j.AtLeast, j.AtMost)
	}
	return nil
}

// Option configures a Guard.
type Option func(*config) error

type config struct{ table string }

// WithTable names the job table (default "sqllock_jobs"), optionally
// schema-qualified. It is validated as an identifier and quoted.
func WithTable(name string) Option {
	return func(c *config) error {
		c.table = name
		return nil
	}
}

// Guard runs jobs at most once per period across every process that shares
// its database. It is safe for concurrent use. It holds no connection; Close
// it before the process exits, so that a try cut short by the shutdown gives
// back the job it took instead of leaving it taken until AtMost.
type Guard struct {
	db      *sql.DB
	dialect sqllock.Dialect
	q       queries
	host    string

	mu     sync.Mutex
	closed bool
	tries  sync.WaitGroup // statements of tries, and their give-backs
}

// New returns a Guard over db for dialect d. It checks its options but does
// not touch the database; run migrations.Up first. New never closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Guard, error) {
	if db == nil {
		return nil, fmt.Errorf("jobguard: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	cfg := config{table: DefaultTable}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("jobguard: %w", err)
		}
	}
	q, err := buildQueries(d, cfg.table)
	if err != nil {
		return nil, err
	}
	return &Guard{db: db, dialect: d, q: q, host: identity.Host()}, nil
}

// Close refuses new tries and waits for tries whose caller gave up to give
// back what their statement took (bounded by a few seconds). Leases already
// held can still be released. Close never closes the *sql.DB.
func (g *Guard) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.tries.Wait()
	return nil
}

// Run runs fn if no other replica holds job, and reports whether it ran.
// A job held elsewhere, or still inside its hold-at-least, is skipped:
// ran is false and err nil.
//
// fn's context carries the run's lease and fencing token ([sqllock.LeaseFrom],
// [sqllock.TokenFrom]) and is cancelled with a cause matching
// [sqllock.ErrLockLost] a safety margin before AtMost passes. After fn the
// job is freed, but not before AtLeast has passed since the run started,
// whether fn failed or not. err joins fn's error with any error from the
// release; it matches ErrLockLost if the run outlived its hold.
func (g *Guard) Run(ctx context.Context, job Job, fn func(ctx context.Context) error) (ran bool, err error) {
	if fn == nil {
		return false, fmt.Errorf("jobguard: run %q: %w: nil function", job.Name, sqllock.ErrInvalidOption)
	}
	lease, err := g.TryAcquire(ctx, job)
	if errors.Is(err, sqllock.ErrNotAcquired) && ctx.Err() == nil {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, sqllock.DoLease(ctx, lease, fn)
}

// TryAcquire takes job if it is free, and otherwise returns an error
// matching sqllock.ErrNotAcquired that names the holder and how long the job
// stays taken. Release the lease when the job is done: Release keeps the
// job taken until AtLeast has passed since the lease was granted.
//
// When ctx ends first, TryAcquire returns at once with an error matching
// both sqllock.ErrNotAcquired and ctx.Err(), and whatever its statement
// still takes on the server is given back at once, not kept until AtMost.
func (g *Guard) TryAcquire(ctx context.Context, job Job) (*Lease, error) {
	if err := job.validate(); err != nil {
		return nil, fmt.Errorf("jobguard: acquire %q: %w", job.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("jobguard: acquire %q: %w", job.Name, sqllock.ErrNotAcquired), err)
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, fmt.Errorf("jobguard: acquire %q: %w: guard closed", job.Name, sqllock.ErrInvalidOption)
	}
	g.tries.Add(1)
	g.mu.Unlock()
	owner := identity.NewOwner()
	start := time.Now()
	a, err := g.tryDetached(ctx, job, owner)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, errors.Join(fmt.Errorf("jobguard: acquire %q: %w", job.Name, sqllock.ErrNotAcquired), ctx.Err())
	case err != nil && (sqlutil.IsDeadlock(err) || sqlutil.IsLockNotAvailable(err)):
		// MariaDB picks one of two racing inserters as a deadlock victim:
		// the other one took the job.
		return nil, fmt.Errorf("jobguard: acquire %q: %w: taken by a concurrent runner", job.Name, sqllock.ErrNotAcquired)
	case err != nil:
		return nil, fmt.Errorf("jobguard: acquire %q: %w", job.Name, err)
	case !a.won:
		if a.holder == "" {
			return nil, fmt.Errorf("jobguard: acquire %q: %w", job.Name, sqllock.ErrNotAcquired)
		}
		return nil, fmt.Errorf("jobguard: acquire %q: %w: taken by %s for %v more", job.Name, sqllock.ErrNotAcquired,
			a.holder, a.remaining.Round(time.Millisecond))
	}
	return g.newLease(job, a.token, start), nil
}

// attempt is the outcome of one acquire statement.
type attempt struct {
	won       bool
	token     int64
	holder    string        // locked_by of the holder, when not won
	remaining time.Duration // until the holder's row frees, when not won
}

// tryDetached runs one try that the caller's cancellation cannot cut short
// on the server. Cancelling a statement in flight does not stop it from
// committing: on MariaDB the driver closes the socket, which a statement
// waiting on a row lock does not notice, and on PostgreSQL the answer may
// be on its way. The job would then stay taken for AtMost by a run that
// never executes. So the statement runs under its own timeout; a caller
// whose ctx ends first gets ctx.Err() at once, and the job is given back
// as soon as the statement returns. The caller has done g.tries.Add(1).
func (g *Guard) tryDetached(ctx context.Context, job Job, owner string) (attempt, error) {
	type result struct {
		a   attempt
		err error
	}
	done := make(chan result) // unbuffered: a result is either taken or given back
	gaveUp := make(chan struct{})
	go func() {
		defer g.tries.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tryTimeout)
		a, err := g.try(sctx, job, owner)
		cancel()
		select {
		case done <- result{a, err}:
			if err != nil && outcomeUnknown(err) {
				g.giveBack(job.Name, owner)
			}
		case <-gaveUp:
			if a.won || (err != nil && outcomeUnknown(err)) {
				g.giveBack(job.Name, owner)
			}
		}
	}()
	select {
	case r := <-done:
		return r.a, r.err
	case <-ctx.Done():
		close(gaveUp)
		return attempt{}, ctx.Err()
	}
}

// outcomeUnknown reports whether a try that failed with err may still have
// taken the job: the statement was cut off (its own timeout, a lost
// connection) rather than refused by the server, which rolls it back.
func outcomeUnknown(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || sqlutil.IsConnLoss(err)
}

// giveBack frees name if the try of owner holds it, at once: the run never
// started, so AtLeast does not apply. Owners are fresh for every try, so it
// frees nothing else. On MariaDB it queues for the row lock behind a
// statement of the try still waiting there, and so runs after it.
func (g *Guard) giveBack(name, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_, _ = g.db.ExecContext(ctx, g.q.giveBack, name, owner)
}

func (g *Guard) try(ctx context.Context, job Job, owner string) (attempt, error) {
	var a attempt
	var rem int64
	atMost := job.AtMost.Microseconds()
	switch g.dialect {
	case sqllock.Postgres:
		err := g.db.QueryRowContext(ctx, g.q.acquire, job.Name, owner, g.host, atMost).Scan(&a.won, &a.token, &a.holder, &rem)
		if errors.Is(err, sql.ErrNoRows) {
			// The winner's row is newer than this statement's snapshot.
			return attempt{}, nil
		}
		if err != nil {
			return a, err
		}
	case sqllock.MySQL:
		var rowOwner string
		err := g.db.QueryRowContext(ctx, g.q.acquire, job.Name, owner, g.host, atMost).Scan(&rowOwner, &a.token, &a.holder, &rem)
		if err != nil {
			return a, err
		}
		a.won = rowOwner == owner
	case sqllock.SQLite:
		if err := g.trySQLite(ctx, job, owner, &a, &rem); err != nil {
			return a, err
		}
	}
	if !a.won {
		a.remaining = time.Duration(max(rem, 0)) * time.Microsecond
	}
	return a, nil
}

func (g *Guard) trySQLite(ctx context.Context, job Job, owner string, a *attempt, rem *int64) (err error) {
	// A read first: in WAL mode it takes no lock, so the replicas that skip
	// do not queue for the single write lock.
	err = g.db.QueryRowContext(ctx, g.q.holder, job.Name).Scan(&a.holder, rem)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case *rem > 0:
		return nil
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// The upsert is the transaction's first statement, a write: SQLite takes
	// the write lock there, so the fence read inside it and the bump below
	// cannot interleave with another writer.
	err = tx.QueryRowContext(ctx, g.q.acquire, job.Name, owner, g.host, job.AtMost.Microseconds()).Scan(&a.token)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		a.won = false
		if err = tx.QueryRowContext(ctx, g.q.holder, job.Name).Scan(&a.holder, rem); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		a.won = true
		if _, err = tx.ExecContext(ctx, g.q.fence, a.token); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// ForceRelease frees the job name for an operator, if the run of token
// (Info.Token, as List shows it) still holds it: the next replica to fire
// runs it. A runner still working is not told; its Release reports
// sqllock.ErrLockLost.
//
// It reports whether it freed the job: false, with a nil error, when the
// job is not taken any more. When another run has taken it since, it frees
// nothing and returns an error matching sqllock.ErrNotHeld that names the
// run holding it now.
func (g *Guard) ForceRelease(ctx context.Context, name string, token int64) (bool, error) {
	if err := sqllock.ValidateKey(name); err != nil {
		return false, fmt.Errorf("jobguard: force release %q: %w", name, err)
	}
	if token <= 0 {
		return false, fmt.Errorf("jobguard: force release %q: %w: token %d names no run (tokens start at 1)", name, sqllock.ErrInvalidOption, token)
	}
	res, err := g.db.ExecContext(ctx, g.q.forceRelease, name, token)
	if err != nil {
		return false, fmt.Errorf("jobguard: force release %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("jobguard: force release %q: %w", name, err)
	}
	if n > 0 {
		return true, nil
	}
	var current int64
	var by string
	err = g.db.QueryRowContext(ctx, g.q.holding, name).Scan(&current, &by)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("jobguard: force release %q: nothing released (token %d does not hold it): %w", name, token, err)
	}
	return false, fmt.Errorf("jobguard: force release %q: %w: taken under token %d now, not %d (by %s); nothing released",
		name, sqllock.ErrNotHeld, current, token, by)
}

// Info describes one taken job, as List reports it.
type Info struct {
	Name        string
	LockedBy    string // hostname/pid of the runner
	Running     bool   // false once the run released and only AtLeast keeps the job
	Token       int64
	LockedAt    time.Time
	LockedUntil time.Time
}

// List returns the jobs taken now, by name.
func (g *Guard) List(ctx context.Context) ([]Info, error) {
	rows, err := g.db.QueryContext(ctx, g.q.list)
	if err != nil {
		return nil, fmt.Errorf("jobguard: list: %w", err)
	}
	defer rows.Close()
	var out []Info
	for rows.Next() {
		var in Info
		var owner string
		var at, until any
		if err := rows.Scan(&in.Name, &owner, &in.LockedBy, &in.Token, &at, &until); err != nil {
			return nil, fmt.Errorf("jobguard: list: %w", err)
		}
		in.Running = owner != ""
		in.LockedAt, in.LockedUntil = sqlutil.ToTime(at), sqlutil.ToTime(until)
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobguard: list: %w", err)
	}
	return out, nil
}
