package telemetry_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/sqllock/sqllock/internal/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errRefused = errors.New("refused")

func refused(err error) bool { return errors.Is(err, errRefused) }

func TestCause(t *testing.T) {
	for msg, want := range map[string]string{
		"the Locker was closed":                                            telemetry.CauseClosed,
		"the row is no longer ours (expired, taken or deleted)":            telemetry.CauseTaken,
		"the row is no longer this run's (force-released by an operator?)": telemetry.CauseTaken,
		"the version moved to 9: another Acquire stamped the key":          telemetry.CauseTaken,
		"the key was taken again with a new token":                         telemetry.CauseTaken,
		"the server did not hold it for this session":                      telemetry.CauseTaken,
		"not renewed before the safety margin":                             telemetry.CauseExpired,
		"ran past its hold-at-most 1s":                                     telemetry.CauseExpired,
		"renewal failed: driver: bad connection":                           telemetry.CauseRenewalFailed,
		"keep-alive failed: boom":                                          telemetry.CauseRenewalFailed,
		"its database session or transaction ended":                        telemetry.CauseSession,
		"the session failed (EOF); closing it freed the key":               telemetry.CauseSession,
		"its session is gone":                                              telemetry.CauseSession,
		"something new":                                                    telemetry.CauseOther,
	} {
		if got := telemetry.Cause(msg); got != want {
			t.Errorf("Cause(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestOutcome(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(live)
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want string
	}{
		{live, nil, telemetry.Acquired},
		{live, errRefused, telemetry.NotAcquired},
		{ended, errors.Join(errRefused, context.Canceled), telemetry.Canceled},
		{live, errors.New("connection refused"), telemetry.Failed},
		// A driver's own deadline, not the caller's context: a failure.
		{live, context.DeadlineExceeded, telemetry.Failed},
	} {
		if got := telemetry.Outcome(c.ctx, c.err, refused); got != c.want {
			t.Errorf("Outcome(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// sum returns the value of the int64 sum name at the data point whose
// attributes include want.
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			d, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s: data %T", name, m.Data)
			}
			for _, p := range d.DataPoints {
				if has(p.Attributes, want) {
					total += p.Value
				}
			}
		}
	}
	return total
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func TestRecords(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	tel := telemetry.New("tablelock", "postgres", telemetry.Options{MeterProvider: mp})
	ctx := context.Background()

	ctx2, a := tel.StartAcquire(ctx, "k", true)
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if got := sum(t, rm, "sqllock.waiters"); got != 1 {
		t.Errorf("waiters during a blocking Acquire = %d, want 1", got)
	}
	a.End(ctx2, telemetry.Acquired, 3, 1, nil)
	h := tel.StartLease(ctx2, "k", 3)
	h.End(telemetry.CauseTaken)
	_, b := tel.StartAcquire(ctx, "k", false)
	b.End(ctx, telemetry.NotAcquired, 0, 1, errRefused)

	if err := rd.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	pg := []attribute.KeyValue{attribute.String(telemetry.AttrStrategy, "tablelock"), attribute.String(telemetry.AttrSystem, "postgresql")}
	if got := sum(t, rm, "sqllock.waiters", pg...); got != 0 {
		t.Errorf("waiters after = %d, want 0", got)
	}
	if got := sum(t, rm, "sqllock.lease.active", pg...); got != 0 {
		t.Errorf("active after a loss = %d, want 0", got)
	}
	if got := sum(t, rm, "sqllock.lease.lost", append(pg, attribute.String(telemetry.AttrCause, telemetry.CauseTaken))...); got != 1 {
		t.Errorf("lost{taken} = %d, want 1", got)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "sqllock.acquire.duration" {
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					o, _ := p.Attributes.Value(telemetry.AttrOutcome)
					counts[o.AsString()] += p.Count
					if _, ok := p.Attributes.Value(telemetry.AttrKey); ok {
						t.Errorf("key attribute without the opt-in: %v", p.Attributes)
					}
				}
			}
		}
	}
	if counts[telemetry.Acquired] != 1 || counts[telemetry.NotAcquired] != 1 || len(counts) != 2 {
		t.Errorf("acquire.duration counts by outcome = %v, want one acquired, one not_acquired", counts)
	}
}

// TestNoAllocWhenOff: with a no-op MeterProvider, recording allocates
// nothing: the attribute sets are built once per Locker.
func TestNoAllocWhenOff(t *testing.T) {
	tel := telemetry.New("tablelock", "postgres", telemetry.Options{MeterProvider: noop.NewMeterProvider()})
	allocs := testing.AllocsPerRun(100, func() {
		tel.Renewal("k", telemetry.RenewOK)
		tel.ForceReleased(context.Background(), "k")
		tel.Conflict(context.Background(), "k")
	})
	if allocs != 0 {
		t.Errorf("%v allocations per measurement with metrics off, want 0", allocs)
	}
}

// BenchmarkAcquireRelease is the telemetry of one Acquire, lease and
// Release without the database: what telemetry adds to each, off (the
// global no-op providers), with the metrics SDK, and with the trace SDK too.
func BenchmarkAcquireRelease(b *testing.B) {
	traced := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = traced.Shutdown(context.Background()) }()
	for _, c := range []struct {
		name string
		opts telemetry.Options
	}{
		{"off", telemetry.Options{}},
		{"metrics", telemetry.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))}},
		{"metrics+traces", telemetry.Options{
			MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
			TracerProvider: traced,
		}},
	} {
		tel := telemetry.New("tablelock", "postgres", c.opts)
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ctx2, a := tel.StartAcquire(ctx, "k", true)
				a.End(ctx2, telemetry.Acquired, 1, 1, nil)
				h := tel.StartLease(ctx2, "k", 1)
				_, sp := tel.StartRelease(ctx, "k", 1)
				telemetry.EndSpan(sp, nil)
				h.End("")
			}
		})
	}
}

// TestOffPathAllocatesNothing: with the global providers as they are until
// an application installs an SDK, a whole acquire, lease and release
// allocates nothing: no span is started, the attribute sets are prebuilt.
func TestOffPathAllocatesNothing(t *testing.T) {
	tel := telemetry.New("tablelock", "postgres", telemetry.Options{})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		ctx2, a := tel.StartAcquire(ctx, "k", true)
		a.End(ctx2, telemetry.Acquired, 1, 1, nil)
		h := tel.StartLease(ctx2, "k", 1)
		h.Event("sqllock.renewal.retried", nil)
		_, sp := tel.StartRelease(ctx, "k", 1)
		telemetry.EndSpan(sp, nil)
		h.End(telemetry.CauseTaken)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per acquire/lease/release with telemetry off, want 0", allocs)
	}
}

// Within: the inner Locker's acquisition records nothing, not even a
// waiter, and For names the primitive's instruments and the caller's key,
// or none.
func TestWithin(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	inner := telemetry.New("tablelock", "postgres", telemetry.Options{MeterProvider: mp})
	prim := telemetry.New("semaphore", "postgres", telemetry.Options{MeterProvider: mp})
	ctx := telemetry.Within(context.Background(), prim, "api")
	actx, a := inner.StartAcquire(ctx, "api#2", true)
	a.End(actx, telemetry.Canceled, 0, 0, context.Canceled)
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if len(d.DataPoints) > 0 {
					t.Errorf("%s recorded under Within: %v", m.Name, d.DataPoints)
				}
			case metricdata.Histogram[float64]:
				if len(d.DataPoints) > 0 {
					t.Errorf("%s recorded under Within: %v", m.Name, d.DataPoints)
				}
			}
		}
	}
	if got, key := inner.For(ctx, "api#2"); got != prim || key != "api" {
		t.Errorf("For under Within(prim, api) = %v, %q; want prim, api", got.Strategy(), key)
	}
	if got, key := inner.For(telemetry.Within(context.Background(), nil, "api"), "api#2"); got != nil || key != "api" {
		t.Errorf("For under Within(nil) = %p, %q; want nil", got, key)
	}
	if got, key := inner.For(context.Background(), "k"); got != inner || key != "k" {
		t.Errorf("For outside Within = %p, %q; want the Locker's own", got, key)
	}
}
