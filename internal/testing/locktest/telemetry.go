package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TelemetryTarget describes one strategy on one database for the telemetry
// tests.
type TelemetryTarget struct {
	DB       *testdb.DB
	Strategy string // the sqllock.strategy attribute it records
	// New returns a fresh Locker that records on mp and tp.
	New func(t testing.TB, mp metric.MeterProvider, tp trace.TracerProvider) sqllock.Locker
	// Steal takes a held lease away from outside (see Target.Steal); nil:
	// the loss comes from a second Acquire of the key (optimistic), found by
	// Release.
	Steal func(t testing.TB, l sqllock.Lease)
	// Cause is the sqllock.cause the loss is recorded with.
	Cause string
	// ForceRelease frees lease's key as an operator would; nil when the
	// strategy has no such call.
	ForceRelease func(t testing.TB, l sqllock.Locker, lease sqllock.Lease)
	// Exclusive: refusals and waits happen (not the optimistic strategy).
	Exclusive bool
}

// Reader collects the metrics of one test.
type Reader struct {
	rd *sdkmetric.ManualReader
	MP *sdkmetric.MeterProvider
}

// NewReader returns an SDK MeterProvider with an in-memory reader, shut
// down at the end of the test.
func NewReader(t testing.TB) *Reader {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &Reader{rd: rd, MP: mp}
}

// Collect reads every instrument now.
func (r *Reader) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// Count is the sum of a counter or up-down counter, or the number of
// samples of a histogram, over the data points whose attributes include
// want.
func Count(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if hasAll(p.Attributes, want) {
						n += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if hasAll(p.Attributes, want) {
						n += int64(p.Count)
					}
				}
			}
		}
	}
	return n
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Metrics runs a scripted session and checks the exact counts: n
// acquisitions, m refusals, one waiter seen while blocked, one loss, one
// force release (where offered) and one fence rejection. It returns what
// it read last, for the checks of one strategy.
func Metrics(t *testing.T, tg TelemetryTarget) metricdata.ResourceMetrics {
	const n, m = 5, 3
	ctx := ctxT(t)
	r := NewReader(t)
	l := tg.New(t, r.MP, nil)
	key := Key(t)
	sys := "postgresql"
	switch tg.DB.Dialect {
	case sqllock.MariaDB, sqllock.MySQL:
		sys = "mysql"
	case sqllock.SQLite:
		sys = "sqlite"
	}
	base := []attribute.KeyValue{attribute.String("sqllock.strategy", tg.Strategy), attribute.String("db.system", sys)}
	with := func(kv ...attribute.KeyValue) []attribute.KeyValue {
		return append(append([]attribute.KeyValue(nil), base...), kv...)
	}
	outcome := func(o string) []attribute.KeyValue { return with(attribute.String("sqllock.outcome", o)) }

	acquired, released := 0, 0
	// n acquisitions, each released.
	var tokens []int64
	for range n {
		lease := mustAcquire(t, ctx, l, key)
		tokens = append(tokens, lease.Token())
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		acquired++
		released++
	}
	refusals := 0
	if tg.Exclusive {
		// m refusals while held, and one blocked waiter.
		held := mustAcquire(t, ctx, l, key)
		acquired++
		for range m {
			if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of a held key: %v, want ErrNotAcquired", err)
			}
			refusals++
		}
		got := make(chan error, 1)
		go func() {
			lease, err := l.Acquire(ctx, key)
			if err == nil {
				err = lease.Release(ctx)
			}
			got <- err
		}()
		waitFor(t, func() bool { return Count(r.Collect(t), "sqllock.waiters", base...) == 1 }, "sqllock.waiters to reach 1 while an Acquire blocks")
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("blocked Acquire: %v", err)
		}
		acquired++
		released += 2
	}

	// One loss.
	victim := mustAcquire(t, ctx, l, key)
	acquired++
	if tg.Steal != nil {
		tg.Steal(t, victim)
		select {
		case <-victim.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the stolen lease did not end")
		}
		if err := victim.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release after the loss: %v, want ErrLockLost", err)
		}
	} else {
		other := mustAcquire(t, ctx, l, key)
		acquired++
		if err := victim.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release of a stale lease: %v, want ErrLockLost", err)
		}
		if err := other.Release(ctx); err != nil {
			t.Fatal(err)
		}
		released++
	}

	// One force release.
	forced := 0
	if tg.ForceRelease != nil {
		k2 := key + "/forced"
		lease := mustAcquire(t, ctx, l, k2)
		acquired++
		tg.ForceRelease(t, l, lease)
		forced++
		// The holder finds out at its release (or renewal) at the latest:
		// either way one more loss, recorded once.
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release after ForceRelease: %v, want ErrLockLost", err)
		}
	}

	// One fence rejection: the newest token first, then an older one.
	f, err := fence.New(tg.DB.Dialect, fence.WithMeterProvider(r.MP))
	if err != nil {
		t.Fatal(err)
	}
	res := key + "/fenced"
	if err := f.Check(ctx, tg.DB.DB, res, tokens[n-1]); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, tg.DB.DB, res, tokens[0]); !errors.Is(err, sqllock.ErrStaleToken) {
		t.Fatalf("fence check of an old token: %v, want ErrStaleToken", err)
	}

	rm := r.Collect(t)
	lost := 1 + forced
	byCause := 1
	if forced > 0 && tg.Cause == "taken" {
		byCause++ // the forced holder finds its row taken too
	}
	for _, c := range []struct {
		name string
		want int
		attr []attribute.KeyValue
	}{
		{"sqllock.acquire.duration", acquired, outcome("acquired")},
		{"sqllock.acquire.duration", refusals, outcome("not_acquired")},
		{"sqllock.acquire.duration", 0, outcome("error")},
		{"sqllock.acquire.duration", 0, outcome("canceled")},
		{"sqllock.lease.held.duration", released + lost, base},
		{"sqllock.lease.active", 0, base},
		{"sqllock.waiters", 0, base},
		{"sqllock.lease.lost", lost, base},
		{"sqllock.lease.lost", byCause, with(attribute.String("sqllock.cause", tg.Cause))},
		{"sqllock.lock.force_released", forced, base},
		{"sqllock.fence.rejected", 1, []attribute.KeyValue{attribute.String("sqllock.strategy", "fence"), attribute.String("db.system", sys)}},
	} {
		if got := Count(rm, c.name, c.attr...); got != int64(c.want) {
			t.Errorf("%s %v = %d, want %d", c.name, c.attr, got, c.want)
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if keyed(mt.Data) {
				t.Errorf("%s carries the key without the opt-in", mt.Name)
			}
		}
	}
	return rm
}

// keyed reports whether any data point carries sqllock.key.
func keyed(d metricdata.Aggregation) bool {
	var sets []attribute.Set
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	for _, s := range sets {
		if s.HasValue("sqllock.key") {
			return true
		}
	}
	return false
}

func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Traces checks the spans of sqllock.Do: the acquire span under the
// caller's, with its outcome, token and wait; the work under the lease's
// span; the release span under the caller's.
func Traces(t *testing.T, tg TelemetryTarget) {
	ctx := ctxT(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	l := tg.New(t, nil, tp)
	key := Key(t)
	ctx, caller := tp.Tracer("test").Start(ctx, "caller")
	var token int64
	err := sqllock.Do(ctx, l, key, func(ctx context.Context) error {
		token, _ = sqllock.TokenFrom(ctx)
		_, work := tp.Tracer("test").Start(ctx, "work")
		work.End()
		return nil
	})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if _, dup := spans[s.Name()]; dup {
			t.Errorf("two spans named %s", s.Name())
		}
		spans[s.Name()] = s
	}
	for _, name := range []string{"caller", "sqllock.acquire", "sqllock.lease", "sqllock.release", "work"} {
		if spans[name] == nil {
			t.Fatalf("no %s span; got %v", name, spans)
		}
	}
	callerID := spans["caller"].SpanContext().SpanID()
	for _, name := range []string{"sqllock.acquire", "sqllock.lease", "sqllock.release"} {
		if got := spans[name].Parent().SpanID(); got != callerID {
			t.Errorf("%s: parent %v, want the caller's span %v", name, got, callerID)
		}
	}
	if got, want := spans["work"].Parent().SpanID(), spans["sqllock.lease"].SpanContext().SpanID(); got != want {
		t.Errorf("work: parent %v, want the lease span %v", got, want)
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range spans["sqllock.acquire"].Attributes() {
		attrs[kv.Key] = kv.Value
	}
	for k, want := range map[attribute.Key]attribute.Value{
		"sqllock.strategy": attribute.StringValue(tg.Strategy),
		"sqllock.key":      attribute.StringValue(key),
		"sqllock.outcome":  attribute.StringValue("acquired"),
		"sqllock.token":    attribute.Int64Value(token),
	} {
		if attrs[k] != want {
			t.Errorf("acquire span %s = %v, want %v", k, attrs[k].String(), want.String())
		}
	}
	if w, ok := attrs["sqllock.wait.seconds"]; !ok || w.AsFloat64() < 0 {
		t.Errorf("acquire span wait.seconds = %v", w.String())
	}
	if a, ok := attrs["sqllock.attempts"]; ok && a.AsInt64() < 1 {
		t.Errorf("acquire span attempts = %d", a.AsInt64())
	}
	if token <= 0 {
		t.Errorf("token %d", token)
	}
}

// WaitCount waits until Count(name, want...) is n, for the metric tests of
// the primitives; after 10s it marks the test failed and returns, so that
// the test goes on to report its other counts.
func (r *Reader) WaitCount(t testing.TB, n int64, name string, want ...attribute.KeyValue) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := Count(r.Collect(t), name, want...)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s %v = %d after 10s, want %d", name, want, got, n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// OnlyStrategy fails the test for every data point in rm whose
// sqllock.strategy is not strategy: a primitive's instruments are its
// own, never the inner Locker's.
func OnlyStrategy(t testing.TB, rm metricdata.ResourceMetrics, strategy string) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, s := range sets {
				if v, _ := s.Value("sqllock.strategy"); v.AsString() != strategy {
					t.Errorf("%s recorded under sqllock.strategy=%q (%v), want %q", m.Name, v.AsString(), s.Encoded(attribute.DefaultEncoder()), strategy)
				}
			}
		}
	}
}

// System is the db.system value of dialect d.
func System(d sqllock.Dialect) string {
	switch d {
	case sqllock.MariaDB, sqllock.MySQL:
		return "mysql"
	case sqllock.SQLite:
		return "sqlite"
	}
	return "postgresql"
}

// DeleteRow deletes key's row from table, as an operator or another
// process taking it would; exactly one row must go.
func DeleteRow(t testing.TB, db *testdb.DB, table, key string) {
	t.Helper()
	q := "DELETE FROM " + table + " WHERE lock_key = ?"
	if db.Dialect == sqllock.Postgres {
		q = "DELETE FROM " + table + " WHERE lock_key = $1"
	}
	res, err := db.ExecContext(context.Background(), q, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("deleted %d rows of %q from %s, want 1", n, key, table)
	}
}

// Spans returns the spans rec ended, by name, each with its
// sqllock.strategy: what the trace tests of the primitives check.
func Spans(rec *tracetest.SpanRecorder) map[string][]string {
	out := map[string][]string{}
	for _, s := range rec.Ended() {
		strategy := ""
		for _, kv := range s.Attributes() {
			if kv.Key == "sqllock.strategy" {
				strategy = kv.Value.AsString()
			}
		}
		out[s.Name()] = append(out[s.Name()], strategy)
	}
	return out
}

// Tally is what a primitive's exact-count metrics test expects once its
// scenario is over: every call's outcome, the leases held and lost.
type Tally struct {
	Acquired, NotAcquired, Canceled int
	Held                            int // leases ended, released or lost
	Lost                            int // leases lost because the row was taken
}

// CheckTally checks rm against want, every point under strategy on d:
// each outcome's count, no errors, the leases held and lost, none active
// and no caller waiting.
func CheckTally(t testing.TB, rm metricdata.ResourceMetrics, strategy string, d sqllock.Dialect, want Tally) {
	t.Helper()
	base := []attribute.KeyValue{attribute.String("sqllock.strategy", strategy), attribute.String("db.system", System(d))}
	with := func(kv attribute.KeyValue) []attribute.KeyValue {
		return append(append([]attribute.KeyValue(nil), base...), kv)
	}
	outcome := func(o string) []attribute.KeyValue { return with(attribute.String("sqllock.outcome", o)) }
	for _, c := range []struct {
		name string
		want int
		attr []attribute.KeyValue
	}{
		{"sqllock.acquire.duration", want.Acquired, outcome("acquired")},
		{"sqllock.acquire.duration", want.NotAcquired, outcome("not_acquired")},
		{"sqllock.acquire.duration", want.Canceled, outcome("canceled")},
		{"sqllock.acquire.duration", 0, outcome("error")},
		{"sqllock.lease.held.duration", want.Held, base},
		{"sqllock.lease.active", 0, base},
		{"sqllock.waiters", 0, nil},
		{"sqllock.lease.lost", want.Lost, with(attribute.String("sqllock.cause", "taken"))},
	} {
		if got := Count(rm, c.name, c.attr...); got != int64(c.want) {
			t.Errorf("%s %v = %d, want %d", c.name, c.attr, got, c.want)
		}
	}
}
