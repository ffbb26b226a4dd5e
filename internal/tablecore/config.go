package tablecore

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/telemetry"
)

// Config is what tablelock's options set; package tablelock documents
// each field's option and default. New checks the fields against each
// other and fills in those that follow from the TTL.
type Config struct {
	Table        string
	TTL          time.Duration
	Renew        time.Duration // 0: TTL/3
	Margin       time.Duration // 0: TTL/10
	MaxBackoff   time.Duration
	Notify       bool
	NotifyOn     bool // WithNotify(true) was given
	Pooler       bool
	AsyncCommit  bool
	Fair         bool
	Bound        time.Duration
	Claim        time.Duration
	SingleWriter bool
	TurnGates    bool
	Logger       *slog.Logger
	Tel          telemetry.Options
}

// The defaults; tablelock's exported constants of the same names say the
// same (a test there keeps them equal).
const (
	defaultTable       = "sqllock_locks"
	defaultTTL         = 30 * time.Second
	defaultWaitBound   = time.Second
	defaultClaimWindow = 250 * time.Millisecond
)

// Defaults returns the Config of a Locker given no options.
func Defaults() Config {
	return Config{
		Table:      defaultTable,
		TTL:        defaultTTL,
		MaxBackoff: 100 * time.Millisecond,
		Notify:     true,
		Bound:      defaultWaitBound,
		Claim:      defaultClaimWindow,
		TurnGates:  true,
		Logger:     slog.New(slog.DiscardHandler),
	}
}

func (c *Config) finish() error {
	if c.Fair && c.Pooler {
		return fmt.Errorf("%w: WithFairness with WithTransactionPooler: the next waiter is called by LISTEN, which does not reach a client through a transaction pooler", sqllock.ErrInvalidOption)
	}
	if c.Fair && !c.Notify {
		return fmt.Errorf("%w: WithFairness with WithNotify(false): the next waiter is called by LISTEN, which WithNotify(false) turns off", sqllock.ErrInvalidOption)
	}
	if c.Pooler {
		if c.NotifyOn {
			return fmt.Errorf("%w: WithNotify(true) with WithTransactionPooler: LISTEN does not reach a client through a transaction pooler", sqllock.ErrInvalidOption)
		}
		c.Notify = false
	}
	if c.Claim >= c.TTL {
		return fmt.Errorf("%w: claim window %v must be shorter than the TTL %v", sqllock.ErrInvalidOption, c.Claim, c.TTL)
	}
	if c.Margin == 0 {
		c.Margin = c.TTL / 10
	}
	if c.Renew == 0 {
		c.Renew = c.TTL / 3
	}
	if c.Margin >= c.TTL/2 {
		return fmt.Errorf("%w: safety margin %v must be under half the TTL %v", sqllock.ErrInvalidOption, c.Margin, c.TTL)
	}
	if c.Renew > (c.TTL-c.Margin)/2 {
		return fmt.Errorf("%w: renew interval %v leaves no room to retry within TTL %v minus margin %v", sqllock.ErrInvalidOption, c.Renew, c.TTL, c.Margin)
	}
	return nil
}
