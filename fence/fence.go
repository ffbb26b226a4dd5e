package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/dialect"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// DefaultTable is the fence table migration 00005 creates.
const DefaultTable = "sqllock_fence_tokens"

// writeAttempts bounds Write's attempts at beginning and checking.
const writeAttempts = 5

// writeBackoff paces Write's retries: 1-2ms, 2-4ms, 4-8ms, 8-16ms.
var writeBackoff = backoff.Exp{Min: 2 * time.Millisecond, Max: 16 * time.Millisecond}

// Option configures a Fence.
type Option func(*config) error

type config struct {
	table string
	mp    metric.MeterProvider
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

// WithMeterProvider sets where the count of refused stale tokens
// (sqllock.fence.rejected) goes (default: the global MeterProvider, a no-op
// until the application installs one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil MeterProvider", sqllock.ErrInvalidOption)
		}
		c.mp = mp
		return nil
	}
}

// Fence checks fencing tokens against a fence table. It holds no
// connection and no state beyond its statements: safe for concurrent use,
// and cheap to keep in a package variable.
//
// Its methods take a sqllock.Querier: normally the *sql.Tx of the write the
// check guards (or the sqlx types that wrap one). A *sql.DB or *sql.Conn
// outside a transaction commits the check on its own, and then it guards
// nothing that comes after it.
type Fence struct {
	table string
	st    store
	tel   *telemetry.T
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
	st, err := storeFor(d, cfg.table)
	if err != nil {
		return nil, err
	}
	return &Fence{table: cfg.table, st: st, tel: telemetry.New("fence", d.String(), telemetry.Options{MeterProvider: cfg.mp})}, nil
}

// storeFor returns d's store for the table named table.
func storeFor(d sqllock.Dialect, table string) (store, error) {
	t, err := dialect.QuoteIdent(d, table)
	if err != nil {
		return nil, fmt.Errorf("fence: table: %w", err)
	}
	mk, ok := stores[d]
	if !ok {
		return nil, fmt.Errorf("fence: %w: no fence for %v", sqllock.ErrUnsupported, d)
	}
	return mk(t), nil
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
func (f *Fence) Check(ctx context.Context, q sqllock.Querier, resource string, token int64) error {
	if err := f.validate(q, resource, token); err != nil {
		return err
	}
	err := f.st.check(ctx, q, resource, token)
	switch {
	case errors.Is(err, sqllock.ErrStaleToken):
		f.tel.FenceRejected(ctx, resource)
	case err != nil:
		return fmt.Errorf("fence: check %q (token %d): %w", resource, token, err)
	}
	return err
}

func stale(resource string, token, last int64) error {
	if last < 0 {
		return fmt.Errorf("fence: %q: %w: token %d is older than one already applied", resource, sqllock.ErrStaleToken, token)
	}
	return fmt.Errorf("fence: %q: %w: token %d is older than %d, already applied", resource, sqllock.ErrStaleToken, token, last)
}

func (f *Fence) validate(q sqllock.Querier, resource string, token int64) error {
	if err := sqllock.ValidateKey(resource); err != nil {
		return fmt.Errorf("fence: resource %q: %w", resource, err)
	}
	if token <= 0 {
		return fmt.Errorf("fence: %q: %w: token %d is not a fencing token (they start at 1; a lease taken without one, advisory.WithoutToken, has 0)", resource, sqllock.ErrInvalidOption, token)
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
func (f *Fence) Guard(ctx context.Context, q sqllock.Querier, resource string) error {
	return f.guard(ctx, q, "guard", resource)
}

func (f *Fence) guard(ctx context.Context, q sqllock.Querier, op, resource string) error {
	lease, ok := sqllock.LeaseFrom(ctx)
	if !ok {
		return fmt.Errorf("fence: %s %q: %w: no lease in the context (call it inside sqllock.Do, DoAll or DoLease)", op, resource, sqllock.ErrNotHeld)
	}
	if err := lease.Err(); err != nil {
		return fmt.Errorf("fence: %s %q (token %d): %w", op, resource, lease.Token(), err)
	}
	return lossOr(ctx, f.Check(ctx, q, resource, lease.Token()))
}

// Claim raises the fence of each resource to the token of the lease in
// ctx, as Guard does, without a write of its own. It is the first thing a
// new holder does, before it reads the state it will act on (a task's
// progress, a cursor, the last chunk written):
//
//	err := sqllock.Do(ctx, locker, "import/42", func(ctx context.Context) error {
//		if err := f.Claim(ctx, db, "import/42"); err != nil {
//			return err // ErrStaleToken: a newer holder claimed it already
//		}
//		done, err := readProgress(ctx, db) // sees every write the fence accepted
//		...
//	})
//
// Why it is needed: a key can change hands while its old holder still
// works (an operator's force release, an expiry during a pause), and the
// old holder learns of it only at its next renewal. Until the new holder
// records its token, the fence still holds the old one and accepts the old
// holder's writes. A new holder that reads first and writes later acts on
// a state that the old holder can still change in between: the trial that
// found this lost a chunk of work to a duplicate key. Once Claim has
// committed, every write under an older token is refused, so what the new
// holder reads afterwards is final as far as older holders go.
//
// With a *sql.DB (or any handle outside a transaction) each check commits
// on its own, which is what a claim needs. With a transaction the claim
// takes effect when it commits; read the state in that same transaction
// to hold off older writers until then. The resources are claimed in
// ascending order, so that two claimers of overlapping sets in
// transactions queue instead of deadlocking. Claim returns an error
// matching sqllock.ErrStaleToken when a newer holder has claimed or
// written a resource already: this holder must stop.
func (f *Fence) Claim(ctx context.Context, q sqllock.Querier, resources ...string) error {
	if len(resources) == 0 {
		return fmt.Errorf("fence: claim: %w: no resources", sqllock.ErrInvalidOption)
	}
	for _, r := range resources {
		if err := sqllock.ValidateKey(r); err != nil {
			return fmt.Errorf("fence: claim: resource %q: %w", r, err)
		}
	}
	sorted := slices.Clone(resources)
	slices.Sort(sorted)
	for _, r := range slices.Compact(sorted) {
		if err := f.guard(ctx, q, "claim", r); err != nil {
			return err
		}
	}
	return nil
}

// lossOr returns err, unless ctx ended because its lease was lost
// (sqllock.Do cancels it with the loss as the cause): then the loss,
// with err after it. A holder's statements fail with "context canceled"
// when that happens; the reason is the loss.
func lossOr(ctx context.Context, err error) error {
	if err == nil || ctxend.Err(ctx) == nil || errors.Is(err, sqllock.ErrLockLost) {
		return err
	}
	var loss error
	if lease, ok := sqllock.LeaseFrom(ctx); ok && errors.Is(lease.Err(), sqllock.ErrLockLost) {
		loss = lease.Err()
	} else if cause := context.Cause(ctx); errors.Is(cause, sqllock.ErrLockLost) {
		loss = cause
	}
	if loss == nil {
		return err
	}
	return fmt.Errorf("%w: %w", loss, err)
}

// Write runs fn in a new transaction on db, after Guard admitted the lease
// in ctx for resource, and commits: the check and fn's writes take effect
// together or not at all. A stale token, an ended lease or fn's error rolls
// back and is returned as it is. A transient failure before fn runs (a
// deadlock or serialization failure of the check, SQLITE_BUSY, a dropped
// connection) is retried a few times, with pauses that end when ctx does;
// fn itself runs at most once. When ctx ended because the lease was lost
// (sqllock.Do cancels it then), the error says so first and matches
// sqllock.ErrLockLost, whatever the statement that noticed reported.
//
// Only fn's writes through tx are fenced: anything else it does (a file, a
// request) happens whatever the check decided, and may happen after the
// lease is lost; see the package doc.
func (f *Fence) Write(ctx context.Context, db *sql.DB, resource string, fn func(tx *sql.Tx) error) error {
	if db == nil || fn == nil {
		return fmt.Errorf("fence: write %q: %w: nil *sql.DB or function", resource, sqllock.ErrInvalidOption)
	}
	var tx *sql.Tx
	attempts := 0
	retryable := func(err error) bool {
		attempts++
		return attempts < writeAttempts && dberr.IsRetryable(err) && !errors.Is(err, sqllock.ErrStaleToken)
	}
	err := backoff.Retry(ctx, writeBackoff, retryable, func(ctx context.Context) error {
		// An ended lease is refused before a connection is taken.
		if lease, ok := sqllock.LeaseFrom(ctx); ok && lease.Err() != nil {
			return fmt.Errorf("fence: write %q (token %d): %w", resource, lease.Token(), lease.Err())
		}
		t, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("fence: write %q: %w", resource, err)
		}
		if err := f.guard(ctx, t, "write", resource); err != nil {
			_ = t.Rollback()
			return err
		}
		tx = t
		return nil
	})
	if err != nil {
		return lossOr(ctx, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return lossOr(ctx, err)
	}
	if err := tx.Commit(); err != nil {
		return lossOr(ctx, fmt.Errorf("fence: write %q: commit: %w", resource, err))
	}
	return nil
}

// Last returns the largest token applied to resource, 0 if none has been.
func (f *Fence) Last(ctx context.Context, q sqllock.Querier, resource string) (int64, error) {
	if err := sqllock.ValidateKey(resource); err != nil {
		return 0, fmt.Errorf("fence: resource %q: %w", resource, err)
	}
	if q == nil {
		return 0, fmt.Errorf("fence: %q: %w: nil Querier", resource, sqllock.ErrInvalidOption)
	}
	last, _, err := f.st.last(ctx, q, resource)
	if err != nil {
		return 0, fmt.Errorf("fence: last %q: %w", resource, err)
	}
	return last, nil
}
