package optimistic_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/optimistic"
)

func telemetryTarget(db *testdb.DB) locktest.TelemetryTarget {
	return locktest.TelemetryTarget{
		DB:       db,
		Strategy: "optimistic",
		New: func(t testing.TB, mp metric.MeterProvider, tp trace.TracerProvider) sqllock.Locker {
			var opts []optimistic.Option
			if mp != nil {
				opts = append(opts, optimistic.WithMeterProvider(mp))
			}
			if tp != nil {
				opts = append(opts, optimistic.WithTracerProvider(tp))
			}
			l, err := optimistic.New(db.DB, db.Dialect, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
		Cause: "taken", // a second Acquire stamped the key
	}
}

func TestMetrics(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rm := locktest.Metrics(t, telemetryTarget(db))
		// The one stale release of the run is the one conflict.
		if got := locktest.Count(rm, "sqllock.optimistic.conflicts", attribute.String("sqllock.strategy", "optimistic")); got != 1 {
			t.Errorf("optimistic.conflicts = %d, want 1", got)
		}
	})
}

func TestTraces(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) { locktest.Traces(t, telemetryTarget(db)) })
}

// BenchmarkTelemetry: uncontended Acquire+Release with telemetry off and
// on, alternated (see locktest.BenchTelemetry).
func BenchmarkTelemetry(b *testing.B) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite} {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			locktest.BenchTelemetry(b, telemetryTarget(db).New)
		})
	}
}
