package tablelock

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/server"
	"github.com/sqllock/sqllock/internal/tablecore"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// DefaultTable is the lock table the shipped migrations create.
const DefaultTable = "sqllock_locks"

// DefaultTTL is the lease length when WithTTL is not given.
const DefaultTTL = 30 * time.Second

// DefaultWaitBound is how long a blocked Acquire waits at most before it
// looks at its key again, when WithWaitBound is not given.
const DefaultWaitBound = time.Second

// DefaultClaimWindow is how long a grant in fair order waits for its
// waiter's claim, when WithClaimWindow is not given.
const DefaultClaimWindow = 250 * time.Millisecond

// MinTTL is the shortest TTL accepted: shorter leases could not be renewed
// in time over a real network.
const MinTTL = 10 * time.Millisecond

// Option configures a Locker. Options validate their values; New checks them
// against each other.
type Option func(*config) error

// config is the core's: the options set what tablecore.New reads.
type config = tablecore.Config

// WithTTL sets how long a lease lives without renewal (default 30s). A held
// lease is renewed every TTL/3; a holder that cannot renew counts its lease
// lost a safety margin before the database would hand the key to another.
func WithTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < MinTTL {
			return fmt.Errorf("%w: TTL %v is below the minimum %v", sqllock.ErrInvalidOption, d, MinTTL)
		}
		c.TTL = d
		return nil
	}
}

// WithTable names the lock table (default "sqllock_locks"), optionally
// schema-qualified. The name is validated as an identifier and quoted; the
// table must have the columns of the shipped one (see Schema).
func WithTable(name string) Option {
	return func(c *config) error {
		c.Table = name
		return nil
	}
}

// WithRenewInterval sets how often a held lease is renewed (default TTL/3).
// It must leave room for a retry before the safety margin: at most half of
// TTL minus the margin.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: renew interval %v must be positive", sqllock.ErrInvalidOption, d)
		}
		c.Renew = d
		return nil
	}
}

// WithSafetyMargin sets how long before the database-side expiry a holder
// that failed to renew counts its lease lost (default TTL/10). It absorbs
// clock-rate differences between client and server.
func WithSafetyMargin(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: safety margin %v must be positive", sqllock.ErrInvalidOption, d)
		}
		c.Margin = d
		return nil
	}
}

// WithMaxBackoff caps the pause between attempts of a blocked Acquire on
// MySQL and SQLite, and on PostgreSQL when notifications are off (default
// 100ms). Waiters in the same process are woken at once by a release
// whatever the cap.
func WithMaxBackoff(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: max backoff %v must be positive", sqllock.ErrInvalidOption, d)
		}
		c.MaxBackoff = d
		return nil
	}
}

// WithNotify turns PostgreSQL LISTEN/NOTIFY wake-ups of this Locker's
// waiters on or off (default on). With it on, one listening connection per
// Locker, open while any Acquire waits, wakes a blocked waiter as soon as
// another process frees its key. It needs the pgx stdlib driver; with
// another driver waiters fall back to backoff. Either way, the statements
// that free a key (Release, ReleaseKey, ForceRelease, Close, the reaper)
// announce it, so that other Lockers' waiters hear of it. On MariaDB it
// turns the Locker's gates on or off (see Waiting in the package doc):
// off, it keeps no gate session and its waiters poll; on SQLite likewise
// for its gates, named pipes beside the database file.
func WithNotify(on bool) Option {
	return func(c *config) error {
		c.Notify, c.NotifyOn = on, on
		return nil
	}
}

// WithTransactionPooler makes the Locker work through a transaction-pooling
// proxy (PgBouncer with pool_mode = transaction), which gives a client a
// server session for one transaction at a time: it keeps no session state
// and runs every statement unprepared (a statement prepared on one turn of
// a server session is missing on the next, or collides with another
// client's of the same name, before PgBouncer 1.21), and its waiters poll
// with backoff instead of listening (LISTEN does not reach a client
// through the proxy). Each of the lease's statements is one transaction
// that reads the database clock, so leases, renewals and fencing hold as
// they do without the proxy. With pgx, also put
// default_query_exec_mode=exec (or simple_protocol) in the DSN. It
// conflicts with WithNotify(true).
func WithTransactionPooler() Option {
	return func(c *config) error {
		c.Pooler = true
		return nil
	}
}

// WithTurnGates lets a waiter for a key held in another process wait in
// the server at the key's turn gate (default on; PostgreSQL through the
// pgx stdlib driver, default order). The gate is a session advisory lock
// that the holder keeps, on a session of its own, while it holds the
// row: its release and the gate's unlock go out in one round trip, and
// the waiter's take rides behind its wait, so the server runs the next
// take the moment the release commits. The row stays the only truth: a
// gate only says when to look. Each wait is bounded by the wait bound
// ([WithWaitBound]), so a gate kept by a holder paused past its lease
// costs a waiter at most that. Each gated wait and gated hold pins a
// pooled session, at most four per Locker (fewer on a capped pool);
// beyond them, and with [WithFairness] or [WithTransactionPooler], waiters
// wait as without gates. On a hot key this serves more turns than pollers
// of raw SQL (docs/performance.md).
func WithTurnGates(on bool) Option {
	return func(c *config) error {
		c.TurnGates = on
		return nil
	}
}

// WithFairness serves the waiters of a key across processes in the order
// they queued (default off; PostgreSQL only). Each waiting Acquire queues
// an entry in the key's row, and the release that finds an entry first
// *grants* the key to it, in the release's own statement: the waiter's
// owner holds the key, under a new token, for the claim window
// ([WithClaimWindow]), and the waiter, called with the token, holds it
// as granted (its renewal extends it to its TTL), or, when it queued
// long before, claims it with a take first. No one cuts in line, the
// releaser included (docs/performance.md has the hot key's figures).
// Within one Locker waiters queue in arrival order as always; a second
// waiter of an owner already waiting for the key there polls instead of
// queuing.
//
// The price: a waiter granted the key while it can no longer take it
// holds it until it gives it back or the window ends. One that gave up,
// or whose Locker is closing, gives it back at once (the next entry is
// granted it); one whose process died holds it for the claim window.
// Every Locker on the table should use it: one without it takes a free
// key out of turn. It needs the calls of [WithNotify] (so the pgx stdlib
// driver, and a pool of more than one connection) and conflicts with
// [WithTransactionPooler]; New refuses it on MySQL, MariaDB and SQLite,
// whose lock tables keep no queue of waiters.
func WithFairness(on bool) Option {
	return func(c *config) error {
		c.Fair = on
		return nil
	}
}

// WithWaitBound sets the longest a blocked Acquire waits before it looks
// at its key again, whatever it waits for (default 1s; at most the
// holder's remaining lease where that is shorter). Wake-ups (a release in
// this process, a NOTIFY, a MariaDB gate, a grant) are the fast path; the
// bound is the safety net, so a wake-up lost (a waiter called or granted
// the key and gone, a notice unheard) costs a waiter at most the bound,
// never a lease. An idle waiter costs the database about one statement
// per bound.
func WithWaitBound(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: wait bound %v must be positive", sqllock.ErrInvalidOption, d)
		}
		c.Bound = d
		return nil
	}
}

// WithClaimWindow sets how long a grant in fair order ([WithFairness])
// holds the key for its waiter before the waiter claims it (default
// 250ms). A release that grants the key to a queued waiter gives it this
// window, on the database clock; the waiter, which normally hears the
// grant at once, holds the key as granted when the take that queued it
// was sent at most 0.65 of the window before (its lease then ends a tenth
// of the window before the grant's, a quarter of the window away at
// least, unless its renewal, at half the time left, extends the key to
// its TTL), and otherwise claims
// the key with a take that extends it to its TTL. A grant nobody takes
// up (the waiter's process died, its Locker closed)
// lapses after the window, and the key goes to the waiters queued next.
// It must be shorter than the TTL.
func WithClaimWindow(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: claim window %v must be positive", sqllock.ErrInvalidOption, d)
		}
		c.Claim = d
		return nil
	}
}

// WithAsyncCommit makes the lock's own statements commit without waiting for
// the PostgreSQL WAL flush (synchronous_commit = off for those statements
// only), roughly tripling the rate on one connection. Releases already do
// without it (see the package doc); this option adds takes and renewals.
//
// The trade-off: a crash of the database server (not a clean restart) can
// forget lock operations from its last ~0.6 s (three times
// wal_writer_delay). A forgotten release only keeps the key until its TTL.
// A forgotten acquisition or renewal is worse: the holder believes it holds
// a lease the database no longer records, and another caller can take the
// key. Fencing still protects the resource: the sequence is WAL-logged ahead
// of the values it hands out, so after a crash it only grows and the next
// holder's token is larger. Off by default; ignored on MySQL and SQLite.
func WithAsyncCommit(on bool) Option {
	return func(c *config) error {
		c.AsyncCommit = on
		return nil
	}
}

// WithLogger sets where renewal failures and losses are logged (default:
// nowhere). Losses are always reported on the lease itself.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", sqllock.ErrInvalidOption)
		}
		c.Logger = l
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

// WithSingleWriter declares that every lock statement sent through the
// Locker's handle reaches one node of a Galera cluster: a single-writer
// proxy (MaxScale's readwritesplit, ProxySQL or HAProxy with one active
// backend) or a DSN naming one node that no other locker writes to. The
// Locker then serves a multi-writer cluster; without it, it refuses with
// sqllock.ErrUnsupported. The declaration is the caller's promise:
// sqllock cannot see the routing. Elsewhere it changes nothing.
func WithSingleWriter(on bool) Option { return server.WithSingleWriter(on, singleWriterOf) }

// singleWriterOf is where a config keeps the single-writer declaration.
func singleWriterOf(c *config) *bool { return &c.SingleWriter }

// telOf is where a config keeps its telemetry options.
func telOf(c *config) *telemetry.Options { return &c.Tel }
