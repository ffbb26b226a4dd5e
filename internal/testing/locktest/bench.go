package locktest

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqllock/sqllock"
)

// BenchHandoff times release → a blocked waiter returns: each iteration
// holder takes a key, waiter blocks on it, and holder releases it. It
// reports the p50 and p99 of that latency, in milliseconds.
func BenchHandoff(b *testing.B, holder, waiter sqllock.Locker) {
	ctx := context.Background()
	key := Key(b)
	var lat []time.Duration
	for b.Loop() {
		held, err := holder.Acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			lease, err := waiter.Acquire(ctx, key)
			if err != nil {
				panic(err)
			}
			got <- time.Now()
			lease.Release(ctx)
		}()
		time.Sleep(2 * time.Millisecond) // let the waiter block
		released := time.Now()
		if err := held.Release(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(released))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchTelemetry measures an uncontended Acquire+Release with telemetry
// off (the global no-op providers) and on, as sub-benchmarks: "metrics"
// (the SDK's MeterProvider, with a reader nobody collects) and
// "metrics+traces" (also the SDK's TracerProvider, every span sampled and
// dropped). The two Lockers alternate every iteration so that a loaded
// machine slows both alike; it reports ns/off, ns/on and their ratio on/off.
func BenchTelemetry(b *testing.B, newLocker func(b testing.TB, mp metric.MeterProvider, tp trace.TracerProvider) sqllock.Locker) {
	for _, traced := range []bool{false, true} {
		name := "metrics"
		if traced {
			name = "metrics+traces"
		}
		b.Run(name, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			var tp trace.TracerProvider
			if traced {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
			}
			benchOffOn(b, newLocker(b, nil, nil), newLocker(b, mp, tp))
		})
	}
}

func benchOffOn(b *testing.B, off, on sqllock.Locker) {
	key := Key(b)
	ctx := context.Background()
	once := func(l sqllock.Locker) time.Duration {
		start := time.Now()
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	once(off)
	once(on)
	var tOff, tOn time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			tOff += once(off)
			tOn += once(on)
		} else {
			tOn += once(on)
			tOff += once(off)
		}
		n++
	}
	b.ReportMetric(float64(tOff.Nanoseconds())/float64(n), "ns/off")
	b.ReportMetric(float64(tOn.Nanoseconds())/float64(n), "ns/on")
	b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
}
