package rowlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sqllock/sqllock"
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
}

func defaults() config {
	return config{
		table:  DefaultTable,
		check:  DefaultCheckInterval,
		logger: slog.New(slog.DiscardHandler),
	}
}

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
// bounds how long a lease whose session died goes unnoticed.
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
