package jobguard

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
)

// WithMeterProvider sets where the Guard's metrics go (default: the global
// MeterProvider, a no-op until the application installs one). Besides the
// lease metrics every strategy records, Run records
// sqllock.jobguard.runs, sqllock.jobguard.skipped and
// sqllock.jobguard.duration, with the job's name as sqllock.job: a program
// declares its jobs, so their names are few.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if err := c.tel.SetMeterProvider(mp); err != nil {
			return fmt.Errorf("%w: %w", sqllock.ErrInvalidOption, err)
		}
		return nil
	}
}

// WithTracerProvider sets where the Guard's spans go (default: the global
// TracerProvider, a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if err := c.tel.SetTracerProvider(tp); err != nil {
			return fmt.Errorf("%w: %w", sqllock.ErrInvalidOption, err)
		}
		return nil
	}
}

// WithKeyAttribute adds the job's name as sqllock.key to the lease metrics
// too (default off).
func WithKeyAttribute(on bool) Option {
	return func(c *config) error {
		c.tel.KeyAttribute = on
		return nil
	}
}
