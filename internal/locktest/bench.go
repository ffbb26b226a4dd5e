package locktest

import (
	"context"
	"slices"
	"testing"
	"time"

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
