package optimistic

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock/internal/telemetry"
)

// WithMeterProvider sets where the Locker's metrics go (default: the
// global MeterProvider, a no-op until the application installs one). A
// release or Check that finds the version moved counts as a lost lease
// (cause taken) and as an optimistic conflict.
func WithMeterProvider(mp metric.MeterProvider) Option { return telemetry.WithMeterProvider(mp, telOf) }

// WithTracerProvider sets where the Locker's spans go (default: the
// global TracerProvider, a no-op until the application installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return telemetry.WithTracerProvider(tp, telOf)
}

// WithKeyAttribute adds the key to the metrics of every lease
// (sqllock.key; default off). Each key becomes its own time series, so
// turn it on only for a few fixed keys, never for keys made from data.
func WithKeyAttribute(on bool) Option { return telemetry.WithKeyAttribute(on, telOf) }

// WithTableMeterProvider sets where the Table's conflict count
// (sqllock.optimistic.conflicts) goes (default: the global MeterProvider).
func WithTableMeterProvider(mp metric.MeterProvider) TableOption {
	return func(t *Table) { t.mp = mp }
}

// telOf is where a config keeps its telemetry options.
func telOf(c *config) *telemetry.Options { return &c.tel }
