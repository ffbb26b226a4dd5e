package rowlock

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// DefaultTable is the table the shipped migrations create.
const DefaultTable = "sqllock_rows"

// DefaultCheckInterval is how often a Locker's monitor checks that the
// sessions of its held leases are alive, when WithCheckInterval is not given.
const DefaultCheckInterval = time.Second

// MinCheckInterval is the shortest check interval accepted.
const MinCheckInterval = 10 * time.Millisecond

// Option configures a Locker. Options validate their values; New checks them
// against each other.
type Option func(*config) error

type config struct {
	table  string
	check  time.Duration
	logger *slog.Logger
	tel    telemetry.Options
	pooler bool
	// singleWriter: WithSingleWriter.
	singleWriter bool
}

func defaults() config {
	return config{
		table:  DefaultTable,
		check:  DefaultCheckInterval,
		logger: slog.New(slog.DiscardHandler),
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

// WithTable names the lock table (default "sqllock_rows"), optionally
// schema-qualified. The name is validated as an identifier and quoted; the
// table must have the columns of the shipped one (see Schema).
func WithTable(name string) Option {
	return func(c *config) error {
		c.table = name
		return nil
	}
}

// WithCheckInterval sets how often the Locker checks, in one query for all
// its held leases, that their sessions are still alive (default 1s). It
// bounds how long a lease whose session died goes unnoticed where the
// socket watch (see the package doc) cannot tell: on MariaDB, and on a
// silent network partition. Checks that fail in a row for three intervals
// (at least 3s) end the leases they could not confirm: behind a partition
// the server may have ended their sessions and handed their rows on.
func WithCheckInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < MinCheckInterval {
			return fmt.Errorf("%w: check interval %v is below the minimum %v", sqllock.ErrInvalidOption, d, MinCheckInterval)
		}
		c.check = d
		return nil
	}
}

// WithLogger sets where failed session checks and losses are logged
// (default: nowhere). Losses are always reported on the lease itself.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", sqllock.ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

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

// WithTransactionPooler makes the Locker work through a transaction-pooling
// proxy (PgBouncer with pool_mode = transaction): its statements run
// unprepared, since a statement prepared on one turn of a server session
// is missing on the next, or collides with another client's of the same
// name, before PgBouncer 1.21. A lease is one transaction, which the proxy
// keeps on one server session from BEGIN to COMMIT, so the row lock and
// the work in Tx hold as without the proxy. Each held lease occupies one
// of the proxy's server sessions for its life: size the pool for the
// leases held at once, or other clients queue in the proxy. With pgx, also
// put default_query_exec_mode=exec (or simple_protocol) in the DSN.
func WithTransactionPooler() Option {
	return func(c *config) error {
		c.pooler = true
		return nil
	}
}

// telOf is where a config keeps its telemetry options.
func telOf(c *config) *telemetry.Options { return &c.tel }
