package jobguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/identity"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/telemetry"
	"github.com/sqllock/sqllock/tablelock"
)

// DefaultTable is the table migration 00004 creates and 00007 gives the
// lock table's shape.
const DefaultTable = "sqllock_jobs"

// MinAtMost is the shortest hold-at-most accepted: a shorter one could pass
// before the statement that takes the row has returned.
const MinAtMost = 10 * time.Millisecond

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
	// KeepAlive extends a run's hold every AtMost/3 while it runs, for
	// jobs whose length is not known in advance (ShedLock's
	// KeepAliveLockProvider): AtMost then bounds how long a crashed
	// runner keeps the job, not how long a run may last. A run whose
	// extension fails until its safety margin, or whose job was
	// force-released, is cancelled as lost.
	KeepAlive bool
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

type config struct {
	table        string
	pooler       bool
	singleWriter bool
	tel          telemetry.Options
}

// WithTable names the job table (default "sqllock_jobs"), optionally
// schema-qualified. It is validated as an identifier and quoted.
func WithTable(name string) Option {
	return func(c *config) error {
		c.table = name
		return nil
	}
}

// WithSingleWriter declares that every lock statement sent through the
// Guard's handle reaches one node of a Galera cluster: a single-writer
// proxy (MaxScale's readwritesplit, ProxySQL or HAProxy with one active
// backend) or a DSN naming one node that no other locker writes to. The
// Guard then serves a multi-writer cluster; without it, it refuses with
// sqllock.ErrUnsupported. The declaration is the caller's promise:
// sqllock cannot see the routing. Elsewhere it changes nothing.
func WithSingleWriter(on bool) Option { return server.WithSingleWriter(on, singleWriterOf) }

// singleWriterOf is where a config keeps the single-writer declaration.
func singleWriterOf(c *config) *bool { return &c.singleWriter }

// WithTransactionPooler makes the Guard work through a transaction-pooling
// proxy (PgBouncer with pool_mode = transaction): its statements run
// unprepared, since before PgBouncer 1.21 a statement prepared on one turn
// of a server session is missing on the next, or collides with another
// client's of the same name. A Guard keeps no session state and has no
// waiters, so nothing else changes. With pgx, also put
// default_query_exec_mode=exec (or simple_protocol) in the DSN.
func WithTransactionPooler() Option {
	return func(c *config) error {
		c.pooler = true
		return nil
	}
}

// Guard runs jobs at most once per period across every process that shares
// its database. It is safe for concurrent use. It holds no connection; Close
// it before the process exits, so that a try cut short by the shutdown gives
// back the job it took instead of leaving it taken until AtMost.
type Guard struct {
	tbl     *locktable.Table
	db      *sql.DB
	dialect sqllock.Dialect
	host    string
	tel     *telemetry.T

	mu     sync.Mutex
	closed bool
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
	// Jobs have no waiters to wake: a replica that skips waits for its
	// next firing.
	tbl, err := locktable.Open(db, d, locktable.Config{Table: cfg.table, Unprepared: cfg.pooler, SingleWriter: cfg.singleWriter})
	if err != nil {
		return nil, fmt.Errorf("jobguard: %w", err)
	}
	return &Guard{tbl: tbl, db: db, dialect: d, host: identity.Host(), tel: telemetry.New("jobguard", d.String(), cfg.tel)}, nil
}

// Close refuses new tries with an error matching sqllock.ErrClosed, waits
// for tries whose caller gave up to give back what their statement took
// (bounded by a few seconds), and closes the prepared statements. Leases
// already held can still be released. Close never closes the *sql.DB;
// later calls return nil.
func (g *Guard) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	return g.tbl.Close()
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
	if errors.Is(err, sqllock.ErrNotAcquired) && ctxend.Err(ctx) == nil {
		g.tel.JobSkipped(ctx, job.Name)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	start := time.Now()
	err = sqllock.DoLease(ctx, lease, fn)
	g.tel.JobRan(ctx, job.Name, time.Since(start))
	return true, err
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
	ctx, obs := g.tel.StartAcquire(ctx, job.Name, false)
	s, err := g.take(ctx, job)
	if err != nil {
		lease.EndAcquire(ctx, obs, nil, 1, err)
		return nil, err
	}
	lease.EndAcquire(ctx, obs, s, 1, nil)
	return s, nil
}

// take is TryAcquire's work.
func (g *Guard) take(ctx context.Context, job Job) (*Lease, error) {
	if err := job.validate(); err != nil {
		return nil, fmt.Errorf("jobguard: acquire %q: %w", job.Name, err)
	}
	if err := ctxend.Err(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("jobguard: acquire %q: %w", job.Name, sqllock.ErrNotAcquired), err)
	}
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("jobguard: acquire %q: %w", job.Name, sqllock.ErrClosed)
	}
	// A fresh owner for every try: a run is never reentrant, and a try cut
	// off in flight can be given back by owner.
	c := locktable.Claim{Key: job.Name, Owner: identity.NewOwner(), Host: g.host, TTL: job.AtMost, Fresh: true}
	start := time.Now()
	a, err := g.tbl.TakeDetached(ctx, c)
	switch {
	case err != nil && ctxend.Err(ctx) != nil:
		return nil, errors.Join(fmt.Errorf("jobguard: acquire %q: %w", job.Name, sqllock.ErrNotAcquired), ctxend.Err(ctx))
	case err != nil && (dberr.IsDeadlock(err) || dberr.IsLockNotAvailable(err)):
		// MariaDB picks one of two racing inserters as a deadlock victim:
		// the other one took the job.
		return nil, fmt.Errorf("jobguard: acquire %q: %w: taken by a concurrent runner", job.Name, sqllock.ErrNotAcquired)
	case err != nil:
		return nil, fmt.Errorf("jobguard: acquire %q: %w", job.Name, err)
	case !a.Won && (a.Host == "" || a.Remaining < 0):
		return nil, fmt.Errorf("jobguard: acquire %q: %w", job.Name, sqllock.ErrNotAcquired)
	case !a.Won:
		return nil, fmt.Errorf("jobguard: acquire %q: %w: taken by %s for %v more", job.Name, sqllock.ErrNotAcquired,
			a.Host, a.Remaining.Round(time.Millisecond))
	}
	return g.newLease(ctx, job, c.Owner, a.Token, start), nil
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
//
// It is audited as tablelock's is (see tablelock.Locker.ForceRelease):
// tablelock.Reason gives the reason, tablelock.AuditLog reads the trail.
func (g *Guard) ForceRelease(ctx context.Context, name string, token int64, opts ...tablelock.ForceOption) (bool, error) {
	freed, err := g.tbl.ForceReleaseAudited(ctx, name, token, locktable.NewAudit(opts...))
	if err != nil {
		return false, fmt.Errorf("jobguard: force release %q: %w", name, err)
	}
	if freed {
		g.tel.ForceReleased(ctx, name)
	}
	return freed, nil
}

// Info describes one taken job, as List reports it: a lock row. Key is the
// job's name; Holds is 1 while its run holds it and 0 once the run released
// it and only AtLeast keeps it.
type Info = tablelock.Info

// List returns the jobs taken now, by name.
func (g *Guard) List(ctx context.Context) ([]Info, error) {
	rows, err := g.tbl.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("jobguard: list: %w", err)
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = Info(r)
	}
	return out, nil
}
