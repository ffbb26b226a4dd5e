package optimistic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/ctxend"
	"github.com/sqllock/sqllock/internal/lease"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/telemetry"
)

var (
	_ sqllock.Locker = (*Locker)(nil)
	_ io.Closer      = (*Locker)(nil)
)

// DefaultTable is the version table the shipped migrations create.
const DefaultTable = "sqllock_versions"

// Option configures a Locker.
type Option func(*config) error

type config struct {
	table        string
	tel          telemetry.Options
	pooler       bool
	singleWriter bool
}

// WithSingleWriter declares that every lock statement sent through the
// Locker's handle reaches one node of a Galera cluster: a single-writer
// proxy (MaxScale's readwritesplit, ProxySQL or HAProxy with one active
// backend) or a DSN naming one node that no other locker writes to. The
// Locker then serves a multi-writer cluster; without it, it refuses with
// sqllock.ErrUnsupported. The declaration is the caller's promise:
// sqllock cannot see the routing. Elsewhere it changes nothing.
func WithSingleWriter(on bool) Option { return server.WithSingleWriter(on, singleWriterOf) }

// singleWriterOf is where a config keeps the single-writer declaration.
func singleWriterOf(c *config) *bool { return &c.singleWriter }

// WithTable names the version table (default "sqllock_versions"),
// optionally schema-qualified. It is validated and quoted in New and must
// have the columns of the shipped one: lock_key (primary key) and version.
func WithTable(name string) Option {
	return func(c *config) error {
		c.table = name
		return nil
	}
}

// WithTransactionPooler makes the Locker work through a transaction-pooling
// proxy (PgBouncer with pool_mode = transaction): its statements on the
// *sql.DB run unprepared, since a statement prepared on one turn of a
// server session is missing on the next, or collides with another
// client's of the same name, before PgBouncer 1.21. The strategy keeps no
// session state, so nothing else changes. With pgx, also put
// default_query_exec_mode=exec (or simple_protocol) in the DSN.
func WithTransactionPooler() Option {
	return func(c *config) error {
		c.pooler = true
		return nil
	}
}

// Locker detects conflicting work on a key; it does not exclude it. See the
// package documentation. It is safe for concurrent use. Close ends what it
// handed out (see the package doc).
type Locker struct {
	db    *sql.DB
	d     sqllock.Dialect
	table string
	vs    versionStore
	srv   *server.Check // nil where the dialect probes no server
	stmts stmtcache.Cache

	tel    *telemetry.T
	closed atomic.Bool // set under mu
	mu     sync.Mutex
	live   map[*Lease]struct{} // leases handed out and not ended by Release or Check
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
	l := &Locker{db: db, d: d, srv: server.New(db, d, cfg.singleWriter), table: cfg.table, vs: st.versions(t), live: make(map[*Lease]struct{}),
		tel: telemetry.New("optimistic", d.String(), cfg.tel)}
	l.stmts.Direct = cfg.pooler
	return l, nil
}

// Close ends the Locker, as the package doc says: it refuses later
// acquisitions with sqllock.ErrClosed, ends every lease it handed out that
// is still live as lost, and closes its prepared statements. Nothing is
// freed in the database: an optimistic lease holds nothing there that
// others wait for. Close never closes the *sql.DB; later calls return nil.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return nil
	}
	l.closed.Store(true)
	live := l.live
	l.live = nil
	l.mu.Unlock()
	for s := range live {
		s.base.Lose(s.base.Lost("the Locker was closed"))
	}
	return l.stmts.Close()
}

// Acquire stamps key with a fresh version from the shared fencing sequence
// and returns a lease whose Token is that version. It never waits for
// another holder: a stamp only makes every earlier lease on key stale, and
// they find out at Release (or Check). It is the same as TryAcquire.
func (l *Locker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.lease(ctx, key)
}

// TryAcquire is Acquire: the optimistic strategy never refuses a key, so it
// never returns sqllock.ErrNotAcquired.
func (l *Locker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	return l.lease(ctx, key)
}

// lease is acquire behind the interface: a nil *Lease would make a
// non-nil sqllock.Lease beside the error.
func (l *Locker) lease(ctx context.Context, key string) (sqllock.Lease, error) {
	lease, err := l.acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return lease, nil
}

func (l *Locker) acquire(ctx context.Context, key string) (*Lease, error) {
	ctx, obs := l.tel.StartAcquire(ctx, key, false)
	s, err := l.stamp(ctx, key)
	if err != nil {
		lease.EndAcquire(ctx, obs, nil, 1, err)
		return nil, err
	}
	lease.EndAcquire(ctx, obs, s, 1, nil)
	return s, nil
}

// stamp is acquire's work.
func (l *Locker) stamp(ctx context.Context, key string) (*Lease, error) {
	if err := sqllock.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("optimistic: acquire %q: %w", key, err)
	}
	if l.closed.Load() {
		return nil, closedErr(key)
	}
	if err := ctxend.Err(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("optimistic: acquire %q: %w", key, sqllock.ErrNotAcquired), err)
	}
	if err := l.srv.Check(ctx); err != nil {
		return nil, fmt.Errorf("optimistic: acquire %q: %w", key, err)
	}
	v, err := l.vs.stamp(ctx, &l.stmts, l.db, key)
	if err != nil {
		if cerr := ctxend.Err(ctx); cerr != nil {
			return nil, errors.Join(fmt.Errorf("optimistic: acquire %q: %w", key, sqllock.ErrNotAcquired), cerr)
		}
		return nil, fmt.Errorf("optimistic: acquire %q: %w", key, err)
	}
	s := &Lease{l: l}
	s.base.Init("optimistic", key, v)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		// Closed during the stamp. The stamp stays: like any stamp it only
		// makes earlier leases of key stale.
		return nil, closedErr(key)
	}
	s.base.Observe(ctx, l.tel) // under mu: Close cannot lose it first
	l.live[s] = struct{}{}
	return s, nil
}

func closedErr(key string) error {
	return fmt.Errorf("optimistic: acquire %q: %w", key, sqllock.ErrClosed)
}

// forget drops s from the leases Close would end: it has ended.
func (l *Locker) forget(s *Lease) {
	l.mu.Lock()
	delete(l.live, s)
	l.mu.Unlock()
}

// Lease is one stamp of a key. Its Token is the version the stamp wrote;
// the lease stays valid while the key's version is still that token.
type Lease struct {
	base lease.Base
	l    *Locker
}

var _ sqllock.Lease = (*Lease)(nil)

// SpanContext returns the lease's span: sqllock.Do runs its work under it.
// It is invalid when tracing is off.
func (s *Lease) SpanContext() trace.SpanContext { return s.base.SpanContext() }

// Key is the key the lease stamped.
func (s *Lease) Key() string { return s.base.Key() }

// Token is the version the lease stamped: a fencing token from the shared
// sequence, larger than any earlier stamp of the key.
func (s *Lease) Token() int64 { return s.base.Token() }

// Done is closed when the lease ends: by Release or ReleaseTx, when
// Release, ReleaseTx or Check find the version moved, or when the Locker is
// closed. Nothing watches the key in between; a stale lease is found out
// when it next asks.
func (s *Lease) Done() <-chan struct{} { return s.base.Done() }

// Err is nil while the lease is held, matches sqllock.ErrLockLost once it
// was found stale or its Locker was closed, and sqllock.ErrReleased after a
// release.
func (s *Lease) Err() error { return s.base.Err() }

// Release is the compare-and-swap: it ends the lease if the key's version is
// still its token, and otherwise reports sqllock.ErrLockLost, meaning that
// another Acquire stamped the key while this lease's work ran. It is safe to
// defer; a second call returns sqllock.ErrReleased. It runs detached from
// ctx's cancellation, with its own timeout, so a deferred Release after a
// cancelled request still reaches the database.
func (s *Lease) Release(ctx context.Context) error {
	return s.base.Release(ctx, func(ctx context.Context, lost error) error {
		return s.free(ctx, s.l.db, lost)
	})
}

// ReleaseTx is Release run inside the caller's transaction, so the work and
// the version check commit or roll back together: when it returns an error
// matching sqllock.ErrLockLost, roll back. ctx is used as given. Either
// way the lease has ended when it returns.
func (s *Lease) ReleaseTx(ctx context.Context, tx sqllock.Execer) error {
	if tx == nil {
		return fmt.Errorf("optimistic: release %q: %w: nil transaction", s.base.Key(), sqllock.ErrInvalidOption)
	}
	return s.base.ReleaseIn(ctx, "release", func(ctx context.Context, lost error) error {
		return s.free(ctx, tx, lost)
	})
}

// free is Release's own work: the version check, on e.
func (s *Lease) free(ctx context.Context, e sqllock.Execer, lost error) error {
	s.l.forget(s)
	if lost != nil {
		return nil // found stale, or the Locker closed: nothing to give back
	}
	ok, err := s.l.vs.release(ctx, &s.l.stmts, e, s.base.Key(), s.base.Token())
	if err != nil {
		return fmt.Errorf("optimistic: release %q: %w", s.base.Key(), err)
	}
	if !ok {
		loss := s.base.Lost("the version moved: another Acquire stamped the key")
		s.l.tel.Conflict(ctx, s.base.Key())
		s.base.End(loss)
		return loss
	}
	return nil
}

// Check reads the key's version and reports sqllock.ErrLockLost (ending the
// lease) if another Acquire stamped it since. Call it before a step that
// cannot be undone; it narrows the window but does not close it.
func (s *Lease) Check(ctx context.Context) error {
	if s.base.Err() != nil {
		return s.ended()
	}
	v, err := s.l.vs.read(ctx, &s.l.stmts, s.l.db, s.base.Key())
	if err != nil {
		return fmt.Errorf("optimistic: check %q: %w", s.base.Key(), err)
	}
	if v == s.base.Token() {
		return nil
	}
	loss := s.base.Lost(fmt.Sprintf("the version moved to %d: another Acquire stamped the key", v))
	s.l.tel.Conflict(ctx, s.base.Key())
	if !s.base.Lose(loss) {
		// Released (its own release may be what moved the version) or
		// lost meanwhile.
		return s.ended()
	}
	s.l.forget(s)
	return loss
}

// ended is Check's answer for a lease that has ended, or is being
// released: its loss, or an error matching sqllock.ErrReleased.
func (s *Lease) ended() error {
	if err := s.base.Err(); errors.Is(err, sqllock.ErrLockLost) {
		return err
	}
	return s.base.Released("check")
}
