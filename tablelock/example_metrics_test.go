package tablelock_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/tablelock"
)

// A Locker records on the MeterProvider it is given (here the SDK's, with
// an in-memory reader; in production one with an exporter). A refused
// TryAcquire is what contention looks like: sqllock.acquire.duration with
// sqllock.outcome="not_acquired".
func Example_metrics() {
	dir, _ := os.MkdirTemp("", "tablelock-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	locker, err := tablelock.New(db, sqllock.SQLite, tablelock.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		_, _ = locker.TryAcquire(ctx, "reports/daily") // refused: held
	}
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "sqllock.acquire.duration" {
			continue
		}
		for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			outcome, _ := p.Attributes.Value("sqllock.outcome")
			if outcome.AsString() == "acquired" {
				fmt.Println("acquired:", p.Count)
			}
		}
		for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			outcome, _ := p.Attributes.Value("sqllock.outcome")
			if outcome.AsString() == "not_acquired" {
				fmt.Println("not_acquired:", p.Count)
			}
		}
	}
	// Output:
	// acquired: 1
	// not_acquired: 3
}
