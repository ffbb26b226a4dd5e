package semaphore_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// A semaphore records under its own name, once per caller: a blocked
// Acquire is one waiter whatever the number of permits, and the permit
// slots it tries or waits on record no outcomes of their own.
func TestMetrics(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		const n, m, permits = 4, 3, 3
		ctx := t.Context()
		r := locktest.NewReader(t)
		s := newSem(t, db, tablelock.WithMeterProvider(r.MP), tablelock.WithTTL(2*time.Second))
		key := locktest.Key(t)
		base := []attribute.KeyValue{attribute.String("sqllock.strategy", "semaphore"), attribute.String("db.system", locktest.System(db.Dialect))}
		acquired, released := 0, 0
		for range n {
			p, err := s.Acquire(ctx, key, permits)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			acquired++
			released++
		}
		// Every permit held: m refusals, one waiter that gives up, one
		// that gets the permit given back.
		var held []*semaphore.Permit
		for range permits {
			p, err := s.TryAcquire(ctx, key, permits)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
			acquired++
		}
		for range m {
			if _, err := s.TryAcquire(ctx, key, permits); !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of a full semaphore: %v, want ErrNotAcquired", err)
			}
		}
		wait := func(ctx context.Context) <-chan error {
			got := make(chan error, 1)
			go func() {
				p, err := s.Acquire(ctx, key, permits)
				if err == nil {
					err = p.Release(context.WithoutCancel(ctx))
				}
				got <- err
			}()
			return got
		}
		cctx, cancel := context.WithCancel(ctx)
		got := wait(cctx)
		r.WaitCount(t, 1, "sqllock.waiters", base...)
		time.Sleep(200 * time.Millisecond) // the waiters of its slots would show by now
		if w := locktest.Count(r.Collect(t), "sqllock.waiters"); w != 1 {
			t.Errorf("one blocked Acquire on %d permits: sqllock.waiters = %d over every attribute, want 1", permits, w)
		}
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled Acquire: %v", err)
		}
		got = wait(ctx)
		r.WaitCount(t, 1, "sqllock.waiters", base...)
		if err := held[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("blocked Acquire: %v", err)
		}
		acquired++
		released++
		for _, p := range held {
			if err := p.Release(ctx); err != nil && !errors.Is(err, sqllock.ErrReleased) {
				t.Fatal(err)
			}
		}
		released += permits

		// One loss: the permit's row deleted.
		p, err := s.Acquire(ctx, key, permits)
		if err != nil {
			t.Fatal(err)
		}
		acquired++
		locktest.DeleteRow(t, db, semaphore.DefaultTable, key+"#"+strconv.Itoa(p.Slot()))
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the permit outlived its row")
		}
		if err := p.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release after the loss: %v, want ErrLockLost", err)
		}

		// The goroutine that found the loss may still be recording it.
		r.WaitCount(t, 1, "sqllock.lease.lost")
		rm := r.Collect(t)
		locktest.OnlyStrategy(t, rm, "semaphore")
		locktest.CheckTally(t, rm, "semaphore", db.Dialect, locktest.Tally{
			Acquired: acquired, NotAcquired: m, Canceled: 1, Held: released + 1, Lost: 1,
		})
	})
}

// A permit's call makes one acquire span, one lease span and one release
// span, each under the semaphore's name: the slots tried make none.
func TestTraces(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := t.Context()
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		s := newSem(t, db, tablelock.WithTracerProvider(tp))
		key := locktest.Key(t)
		// Three calls on three permits: the later ones may try taken slots first.
		var held []*semaphore.Permit
		for range 3 {
			p, err := s.Acquire(ctx, key, 3)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, p)
		}
		for _, p := range held {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string][]string{
			"sqllock.acquire": {"semaphore", "semaphore", "semaphore"},
			"sqllock.lease":   {"semaphore", "semaphore", "semaphore"},
			"sqllock.release": {"semaphore", "semaphore", "semaphore"},
		}
		if got := locktest.Spans(rec); !reflect.DeepEqual(got, want) {
			t.Errorf("spans by name, with their strategy: %v, want %v", got, want)
		}
	})
}
