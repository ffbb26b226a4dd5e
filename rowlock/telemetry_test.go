package rowlock_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func telemetryTarget(db *testdb.DB) locktest.TelemetryTarget {
	return locktest.TelemetryTarget{
		DB:       db,
		Strategy: "rowlock",
		New: func(t testing.TB, mp metric.MeterProvider, tp trace.TracerProvider) sqllock.Locker {
			opts := []rowlock.Option{rowlock.WithCheckInterval(200 * time.Millisecond)}
			if mp != nil {
				opts = append(opts, rowlock.WithMeterProvider(mp))
			}
			if tp != nil {
				opts = append(opts, rowlock.WithTracerProvider(tp))
			}
			return newLocker(t, db, opts...)
		},
		Steal:     func(t testing.TB, l sqllock.Lease) { killSession(t, db, sessionOf(t, db.Dialect, l)) },
		Cause:     "session",
		Exclusive: true,
	}
}

func TestMetrics(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) { locktest.Metrics(t, telemetryTarget(db)) })
}

func TestTraces(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) { locktest.Traces(t, telemetryTarget(db)) })
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
