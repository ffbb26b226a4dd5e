package optimistic

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
)

// WithMeterProvider sets where the Locker's metrics go (default: the
// global MeterProvider, a no-op until the application installs one). A
// release or Check that finds the version moved counts as a lost lease
// (cause taken) and as an optimistic conflict.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if err := c.tel.SetMeterProvider(mp); err != nil {
			return fmt.Errorf("%w: %w", sqllock.ErrInvalidOption, err)
		}
		return nil
	}
}

// WithTracerProvider sets where the Locker's spans go (default: the
// global TracerProvider, a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if err := c.tel.SetTracerProvider(tp); err != nil {
			return fmt.Errorf("%w: %w", sqllock.ErrInvalidOption, err)
		}
		return nil
	}
}

// WithKeyAttribute adds the key to the metrics of every lease
// (sqllock.key; default off). Each key becomes its own time series, so
// turn it on only for a few fixed keys, never for keys made from data.
func WithKeyAttribute(on bool) Option {
	return func(c *config) error {
		c.tel.KeyAttribute = on
		return nil
	}
}

// WithTableMeterProvider sets where the Table's conflict count
// (sqllock.optimistic.conflicts) goes (default: the global MeterProvider).
func WithTableMeterProvider(mp metric.MeterProvider) TableOption {
	return func(t *Table) { t.mp = mp }
}
