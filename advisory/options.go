package advisory

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// DefaultNamespace prefixes every lock name unless WithNamespace says
// otherwise, so sqllock's locks do not meet an application's own
// pg_advisory_lock ids or GET_LOCK names.
const DefaultNamespace = "sqllock"

// MaxNamespaceLen is the longest namespace, in bytes.
const MaxNamespaceLen = 32

// Defaults.
const (
	DefaultSessions      = 2
	DefaultCheckInterval = time.Second
	DefaultMaxBackoff    = 50 * time.Millisecond
	DefaultWaitSessions  = 4
)

// MinCheckInterval is the shortest session check interval accepted.
const MinCheckInterval = 10 * time.Millisecond

// Option configures a Locker. Options validate their values; New checks them
// against each other.
type Option func(*config) error

type config struct {
	namespace  string
	sessions   int
	check      time.Duration
	maxBackoff time.Duration
	waits      int
	logger     *slog.Logger
	tel        telemetry.Options
	pooler     bool
	noToken    bool
	// singleWriter: WithSingleWriter.
	singleWriter bool
}

func defaults() config {
	return config{
		namespace:  DefaultNamespace,
		sessions:   DefaultSessions,
		check:      DefaultCheckInterval,
		maxBackoff: DefaultMaxBackoff,
		waits:      DefaultWaitSessions,
		logger:     slog.New(slog.DiscardHandler),
	}
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

// WithNamespace sets the prefix of every lock name (default "sqllock"): the
// lock for key is "namespace:key" (see LockName). An empty namespace makes
// the name the key itself, to share locks with code that calls GET_LOCK by
// hand. A namespace is at most MaxNamespaceLen bytes of UTF-8 without ':'
// or NUL, so a name has exactly one reading.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		switch {
		case len(ns) > MaxNamespaceLen:
			return fmt.Errorf("%w: namespace %q longer than %d bytes", sqllock.ErrInvalidOption, ns, MaxNamespaceLen)
		case !utf8.ValidString(ns):
			return fmt.Errorf("%w: namespace %q is not valid UTF-8", sqllock.ErrInvalidOption, ns)
		case strings.ContainsAny(ns, ":\x00"):
			return fmt.Errorf("%w: namespace %q contains ':' or NUL", sqllock.ErrInvalidOption, ns)
		}
		c.namespace = ns
		return nil
	}
}

// WithSessions sets how many database sessions the Locker pins at most
// (default 2, at most 64). Every held lock lives on one of them, chosen by
// the key's hash; statements on one session run one at a time, so more
// sessions buy throughput under many concurrent holders, not capacity.
func WithSessions(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 64 {
			return fmt.Errorf("%w: sessions %d not in 1..64", sqllock.ErrInvalidOption, n)
		}
		c.sessions = n
		return nil
	}
}

// WithWaitSessions sets how many blocked Acquires of the Locker may wait
// in the server at once (default 4, at most 64; 0 makes every wait poll).
// Each takes a session of its own from the pool: its key's lock is
// requested there and the server grants it the moment the holder lets go,
// in the order the sessions asked, with no statement sent meanwhile. The
// lease then lives on that session until its release; the session goes
// back to the pool one check interval after its last use. Waits beyond
// the limit, and every wait when the pool's SetMaxOpenConns leaves no room
// (fewer than the pinned sessions plus two connections), poll instead
// (WithMaxBackoff).
func WithWaitSessions(n int) Option {
	return func(c *config) error {
		if n < 0 || n > 64 {
			return fmt.Errorf("%w: wait sessions %d not in 0..64", sqllock.ErrInvalidOption, n)
		}
		c.waits = n
		return nil
	}
}

// WithCheckInterval sets how often each pinned session that holds locks is
// pinged (default 1s). A session that fails its check is closed and all its
// leases end with sqllock.ErrLockLost, so a loss is noticed within about
// twice the interval (the ping's own timeout is the interval, at least 1s).
// On PostgreSQL a session the server closes is noticed at once instead
// (see the package doc's Loss section).
func WithCheckInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < MinCheckInterval {
			return fmt.Errorf("%w: check interval %v below the minimum %v", sqllock.ErrInvalidOption, d, MinCheckInterval)
		}
		c.check = d
		return nil
	}
}

// WithMaxBackoff caps the pause between attempts of a blocked Acquire that
// polls, one that found no wait session free (WithWaitSessions), whose
// key is held by another process (default 50ms). Releases in this process,
// by any Locker, wake waiters at once whatever the cap.
func WithMaxBackoff(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: max backoff %v below 1ms", sqllock.ErrInvalidOption, d)
		}
		c.maxBackoff = d
		return nil
	}
}

// WithTransactionPooler makes the Locker safe behind a transaction-pooling
// proxy (PgBouncer with pool_mode = transaction), which gives a client a
// server session for one transaction at a time. A session lock taken
// through it stays on a server session that the proxy then hands to other
// clients, and PostgreSQL advisory locks are reentrant per session: the
// next client to take the same key is granted it too. With this option
// Acquire, TryAcquire and their shared forms refuse with an error matching
// sqllock.ErrUnsupported that says so, and only the transaction-level
// forms work: AcquireTx, TryAcquireTx and DoTx, whose lock ends with the
// transaction that the proxy keeps on one server session. With pgx, also
// put default_query_exec_mode=exec (or simple_protocol) in the DSN. MySQL
// has no transaction-level named locks: New refuses the option there.
func WithTransactionPooler() Option {
	return func(c *config) error {
		c.pooler = true
		return nil
	}
}

// WithoutToken takes locks without drawing a fencing token, for callers
// that never fence: every lease's Token is 0, and package fence refuses
// it (a token must be at least 1). It gives up what the token is for: a
// holder paused past the loss of its session (a kill, a network cut, a
// long GC) cannot be stopped from writing after its successor, since the
// protected resource has nothing to compare. What it saves is the draw:
// on PostgreSQL a token is a nextval of the shared sequence, which
// serialises concurrent draws on the sequence's page and writes to the WAL
// every 32 values, plus the checks around it; sqllock bench measures
// advisory with and without it (docs/performance.md). The lock itself is
// the same.
func WithoutToken() Option {
	return func(c *config) error {
		c.noToken = true
		return nil
	}
}

// WithLogger sets where session failures are logged (default: nowhere).
// Losses are always reported on the leases themselves.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", sqllock.ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// pingTimeout bounds one session check.
func (c *config) pingTimeout() time.Duration { return max(c.check, time.Second) }

// WithMeterProvider sets where the Locker's metrics go (default: the
// global MeterProvider, a no-op until the application installs one).
func WithMeterProvider(mp metric.MeterProvider) Option { return telemetry.WithMeterProvider(mp, telOf) }

// WithTracerProvider sets where the Locker's spans go (default: the
// global TracerProvider, a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return telemetry.WithTracerProvider(tp, telOf)
}

// WithKeyAttribute adds the key to the metrics of every lease
// (sqllock.key; default off). Each key becomes its own time series, so
// turn it on only for a few fixed keys, never for keys made from data.
// Spans carry the key either way.
func WithKeyAttribute(on bool) Option { return telemetry.WithKeyAttribute(on, telOf) }

// telOf is where a config keeps its telemetry options.
func telOf(c *config) *telemetry.Options { return &c.tel }
