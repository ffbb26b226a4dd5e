package advisory_test

import (
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

func telemetryTarget(db *testdb.DB) locktest.TelemetryTarget {
	return locktest.TelemetryTarget{
		DB:       db,
		Strategy: "advisory",
		New: func(t testing.TB, mp metric.MeterProvider, tp trace.TracerProvider) sqllock.Locker {
			var opts []advisory.Option
			if mp != nil {
				opts = append(opts, advisory.WithMeterProvider(mp))
			}
			if tp != nil {
				opts = append(opts, advisory.WithTracerProvider(tp))
			}
			return newLocker(t, db, opts...)
		},
		Steal:     func(t testing.TB, l sqllock.Lease) { killHolder(t, db, l.Key()) },
		Cause:     "session",
		Exclusive: true,
	}
}

func TestMetrics(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) { locktest.Metrics(t, telemetryTarget(db)) })
}

func TestTraces(t *testing.T) {
	forEach(t, func(t *testing.T, db *testdb.DB) { locktest.Traces(t, telemetryTarget(db)) })
}

// BenchmarkTelemetry: uncontended Acquire+Release with telemetry off and
// on, alternated (see locktest.BenchTelemetry).
func BenchmarkTelemetry(b *testing.B) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			locktest.BenchTelemetry(b, telemetryTarget(db).New)
		})
	}
}
