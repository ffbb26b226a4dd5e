package optimistic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

var _ sqllock.Locker = (*Locker)(nil)

// DefaultTable is the version table the shipped migrations create.
const DefaultTable = "sqllock_versions"

// releaseTimeout bounds Release, which runs detached from the caller's
// context so that a deferred Release still reaches the database.
const releaseTimeout = 5 * time.Second

// Option configures a Locker.
type Option func(*config) error

type config struct{ table string }

// WithTable names the version table (default "sqllock_versions"),
// optionally schema-qualified. It is validated and quoted in New and must
// have the columns of the shipped one: lock_key (primary key) and version.
func WithTable(name string) Option {
	return func(c *config) error {
		c.table = name
		return nil
	}
}

// Locker detects conflicting work on a key; it does not exclude it. See the
// package documentation. It is safe for concurrent use.
type Locker struct {
	db    *sql.DB
	table string
	vs    versionStore
	stmts stmtcache.Cache
}

// New returns a Locker over db for dialect d, using the version table of the
// shipped migrations (run migrations.Up first). It does not touch the
// database and never closes db.
func New(db *sql.DB, d sqllock.Dialect, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("optimistic: %w: nil *sql.DB", sqllock.ErrInvalidOption)
	}
	cfg := config{table: DefaultTable}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("optimistic: %w", err)
		}
	}
	st, err := storeFor(d)
	if err != nil {
		return nil, fmt.Errorf("optimistic: %w", err)
	}
	t, err := st.quote(cfg.table)
	if err != nil {
		return nil, fmt.Errorf("optimistic: table: %w", err)
	}
	return &Locker{db: db, table: cfg.table, vs: st.versions(t)}, nil
}

// Close closes the Locker's prepared statements. It never closes the
// *sql.DB; leases already handed out can still be released.
func (l *Locker) Close() error { return l.stmts.Close() }

// Acquire stamps key with a fresh version from the shared fencing sequence
// and returns a lease whose Token is that version. It never waits for
// another holder: a stamp only makes every earlier lease on key stale, and
// they find out at Release (or Check). It is the same as TryAcquire.
func (l *Locker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key)
}

// TryAcquire is Acquire: the optimistic strategy never refuses a key, so it
// never returns sqllock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.acquire(ctx, key)
}

func (l *Locker) acquire(ctx context.Context, key string) (*Lease, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("optimistic: acquire %q: %w", key, err)
	}
	v, err := l.vs.stamp(ctx, &l.stmts, l.db, key)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errors.Join(fmt.Errorf("optimistic: acquire %q: %w", key, sqllock.ErrNotAcquired), ctx.Err())
		}
		return nil, fmt.Errorf("optimistic: acquire %q: %w", key, err)
	}
	return &Lease{l: l, key: key, token: v, done: make(chan struct{})}, nil
}

// Lease is one stamp of a key. Its Token is the version the stamp wrote;
// the lease stays valid while the key's version is still that token.
type Lease struct {
	l     *Locker
	key   string
	token int64

	mu       sync.Mutex
	err      error // nil while held
	reported bool  // a loss was returned by Release already
	done     chan struct{}
}

var _ sqllock.Lease = (*Lease)(nil)

// Key is the key the lease stamped.
func (s *Lease) Key() string { return s.key }

// Token is the version the lease stamped: a fencing token from the shared
// sequence, larger than any earlier stamp of the key.
func (s *Lease) Token() int64 { return s.token }

// Done is closed when the lease ends: by Release or ReleaseTx, or when
// Release, ReleaseTx or Check find the version moved. Nothing watches the
// key in between; a stale lease is found out when it next asks.
func (s *Lease) Done() <-chan struct{} { return s.done }

// Err is nil while the lease is held, matches sqllock.ErrLockLost once it
// was found stale and sqllock.ErrReleased after a release.
func (s *Lease) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Release is the compare-and-swap: it ends the lease if the key's version is
// still its token, and otherwise reports sqllock.ErrLockLost, meaning that
// another Acquire stamped the key while this lease's work ran. It is safe to
// defer; a second call returns sqllock.ErrReleased. It runs detached from
// ctx's cancellation, with its own timeout, so a deferred Release after a
// cancelled request still reaches the database.
func (s *Lease) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return s.release(ctx, s.l.db)
}

// ReleaseTx is Release run inside the caller's transaction, so the work and
// the version check commit or roll back together: when it returns an error
// matching sqllock.ErrLockLost, roll back. ctx is used as given.
func (s *Lease) ReleaseTx(ctx context.Context, tx sqllock.Execer) error {
	if tx == nil {
		return fmt.Errorf("optimistic: release %q: %w: nil transaction", s.key, sqllock.ErrInvalidOption)
	}
	return s.release(ctx, tx)
}

func (s *Lease) release(ctx context.Context, e sqllock.Execer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.endedErr("release")
	}
	ok, err := s.l.vs.release(ctx, &s.l.stmts, e, s.key, s.token)
	if err != nil {
		return fmt.Errorf("optimistic: release %q: %w", s.key, err)
	}
	if !ok {
		s.end(fmt.Errorf("optimistic: release %q: version moved from %d: %w", s.key, s.token, sqllock.ErrLockLost))
		s.reported = true
		return s.err
	}
	s.end(fmt.Errorf("optimistic: %q: %w", s.key, sqllock.ErrReleased))
	return nil
}

// Check reads the key's version and reports sqllock.ErrLockLost (ending the
// lease) if another Acquire stamped it since. Call it before a step that
// cannot be undone; it narrows the window but does not close it.
func (s *Lease) Check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.endedErr("check")
	}
	v, err := s.l.vs.read(ctx, &s.l.stmts, s.l.db, s.key)
	if err != nil {
		return fmt.Errorf("optimistic: check %q: %w", s.key, err)
	}
	if v != s.token {
		s.end(fmt.Errorf("optimistic: check %q: version moved from %d to %d: %w", s.key, s.token, v, sqllock.ErrLockLost))
		return s.err
	}
	return nil
}

// endedErr is the answer of a lease that already ended: the loss the first
// time it is reported through Release, ErrReleased after that.
func (s *Lease) endedErr(op string) error {
	if errors.Is(s.err, sqllock.ErrLockLost) && (op != "release" || !s.reported) {
		s.reported = s.reported || op == "release"
		return s.err
	}
	return fmt.Errorf("optimistic: %s %q: %w", op, s.key, sqllock.ErrReleased)
}

func (s *Lease) end(err error) {
	s.err = err
	close(s.done)
}
