package tablelock_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

func telemetryTarget(db *testdb.DB) locktest.TelemetryTarget {
	return locktest.TelemetryTarget{
		DB:       db,
		Strategy: "tablelock",
		New: func(t testing.TB, mp metric.MeterProvider, tp trace.TracerProvider) sqllock.Locker {
			opts := []tablelock.Option{tablelock.WithTTL(900 * time.Millisecond)}
			if mp != nil {
				opts = append(opts, tablelock.WithMeterProvider(mp))
			}
			if tp != nil {
				opts = append(opts, tablelock.WithTracerProvider(tp))
			}
			return newLocker(t, db, opts...)
		},
		Steal: func(t testing.TB, l sqllock.Lease) { deleteRow(t, db, l.Key()) },
		Cause: "taken",
		ForceRelease: func(t testing.TB, l sqllock.Locker, lease sqllock.Lease) {
			freed, err := l.(*tablelock.Locker).ForceRelease(t.Context(), lease.Key(), lease.Token())
			if err != nil || !freed {
				t.Fatalf("ForceRelease: %v, %v", freed, err)
			}
		},
		Exclusive: true,
	}
}

func TestMetrics(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) { locktest.Metrics(t, telemetryTarget(db)) })
}

func TestTraces(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) { locktest.Traces(t, telemetryTarget(db)) })
}

func TestNilProviders(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	for _, o := range []tablelock.Option{tablelock.WithMeterProvider(nil), tablelock.WithTracerProvider(nil)} {
		if _, err := tablelock.New(db.DB, db.Dialect, o); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("New with a nil provider: %v, want ErrInvalidOption", err)
		}
	}
}

// BenchmarkTelemetry: uncontended Acquire+Release with telemetry off and
// on, alternated (see locktest.BenchTelemetry).
func BenchmarkTelemetry(b *testing.B) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite} {
		b.Run(d.String(), func(b *testing.B) {
			db := testdb.Open(b, d)
			// The default TTL: a loaded machine must not expire the lease.
			locktest.BenchTelemetry(b, func(b testing.TB, mp metric.MeterProvider, tp trace.TracerProvider) sqllock.Locker {
				var opts []tablelock.Option
				if mp != nil {
					opts = append(opts, tablelock.WithMeterProvider(mp))
				}
				if tp != nil {
					opts = append(opts, tablelock.WithTracerProvider(tp))
				}
				return newLocker(b, db, opts...)
			})
		})
	}
}

// A loss is logged with the attribute names every package uses, on a
// logger the application passed; without one nothing is logged.
func TestLossLogAttributes(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	var buf syncBuffer
	l := newLocker(t, db, tablelock.WithTTL(900*time.Millisecond), tablelock.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	ctx := t.Context()
	lease, err := l.Acquire(ctx, locktest.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	deleteRow(t, db, lease.Key())
	<-lease.Done()
	_ = lease.Release(ctx)
	var rec map[string]any
	for line := range strings.Lines(buf.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r["msg"] == "tablelock: lease lost" {
			rec = r
		}
	}
	if rec == nil {
		t.Fatalf("no loss logged: %s", buf.String())
	}
	for k, want := range map[string]any{
		"sqllock.strategy": "tablelock",
		"db.system":        "sqlite",
		"sqllock.key":      lease.Key(),
		"sqllock.token":    float64(lease.Token()),
		"sqllock.cause":    "taken",
	} {
		if rec[k] != want {
			t.Errorf("log %s = %v, want %v", k, rec[k], want)
		}
	}
	if s, _ := rec["error"].(string); !strings.Contains(s, "no longer ours") {
		t.Errorf("log error = %q, want the loss's own words", s)
	}
}

// syncBuffer is a bytes.Buffer safe for the renewal goroutine's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
