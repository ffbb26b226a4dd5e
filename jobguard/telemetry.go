package jobguard

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock/internal/telemetry"
)

// WithMeterProvider sets where the Guard's metrics go (default: the global
// MeterProvider, a no-op until the application installs one). Besides the
// lease metrics every strategy records, Run records
// sqllock.jobguard.runs, sqllock.jobguard.skipped and
// sqllock.jobguard.duration, with the job's name as sqllock.job: a program
// declares its jobs, so their names are few.
func WithMeterProvider(mp metric.MeterProvider) Option { return telemetry.WithMeterProvider(mp, telOf) }

// WithTracerProvider sets where the Guard's spans go (default: the global
// TracerProvider, a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return telemetry.WithTracerProvider(tp, telOf)
}

// WithKeyAttribute adds the job's name as sqllock.key to the lease metrics
// too (default off).
func WithKeyAttribute(on bool) Option { return telemetry.WithKeyAttribute(on, telOf) }

// telOf is where a config keeps its telemetry options.
func telOf(c *config) *telemetry.Options { return &c.tel }
