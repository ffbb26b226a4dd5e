package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/tablelock"
)

// An rwlock records under its own name, one outcome and one waiter per
// RLock or Lock, and a hold as one lease: the writers' gate a reader
// passes and the reader rows a writer waits out record nothing.
func TestMetrics(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		const n = 3
		ctx := t.Context()
		r := locktest.NewReader(t)
		rw := newRW(t, db, tablelock.WithMeterProvider(r.MP), tablelock.WithTTL(2*time.Second))
		key := fmt.Sprintf("metrics/%x", rand.Uint64())
		base := []attribute.KeyValue{attribute.String("sqllock.strategy", "rwlock"), attribute.String("db.system", locktest.System(db.Dialect))}
		acquired, released := 0, 0
		for range n {
			for _, lock := range []func(context.Context, string) (*rwlock.Lease, error){rw.RLock, rw.Lock} {
				l, err := lock(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				acquired++
				released++
			}
		}
		wait := func(ctx context.Context, lock func(context.Context, string) (*rwlock.Lease, error)) <-chan error {
			got := make(chan error, 1)
			go func() {
				l, err := lock(ctx, key)
				if err == nil {
					err = l.Release(context.WithoutCancel(ctx))
				}
				got <- err
			}()
			return got
		}

		// A writer holds: two refusals, a reader that gives up.
		w, err := rw.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		acquired++
		if _, err := rw.TryRLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryRLock under a writer: %v, want ErrNotAcquired", err)
		}
		if _, err := rw.TryLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryLock under a writer: %v, want ErrNotAcquired", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		got := wait(cctx, rw.RLock)
		r.WaitCount(t, 1, "sqllock.waiters", base...)
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled RLock: %v", err)
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		released++

		// A reader holds: a writer waits for it, one waiter.
		rd, err := rw.RLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		acquired++
		got = wait(ctx, rw.Lock)
		r.WaitCount(t, 1, "sqllock.waiters", base...)
		time.Sleep(200 * time.Millisecond) // the wait on the reader's row would show by now
		if w := locktest.Count(r.Collect(t), "sqllock.waiters"); w != 1 {
			t.Errorf("one blocked Lock: sqllock.waiters = %d over every attribute, want 1", w)
		}
		if err := rd.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("blocked Lock: %v", err)
		}
		acquired++
		released += 2

		// One loss: the writer's row deleted.
		w, err = rw.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		acquired++
		locktest.DeleteRow(t, db, rwlock.DefaultTable, key+"\x1frw:w")
		select {
		case <-w.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the write hold outlived its row")
		}
		if err := w.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release after the loss: %v, want ErrLockLost", err)
		}

		// The goroutine that found the loss may still be recording it.
		r.WaitCount(t, 1, "sqllock.lease.lost")
		rm := r.Collect(t)
		locktest.OnlyStrategy(t, rm, "rwlock")
		locktest.CheckTally(t, rm, "rwlock", db.Dialect, locktest.Tally{
			Acquired: acquired, NotAcquired: 2, Canceled: 1, Held: released + 1, Lost: 1,
		})
	})
}

// A read and a write each make one acquire, one lease and one release
// span under the rwlock's name: the gate a reader passes makes none.
func TestTraces(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := t.Context()
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		rw := newRW(t, db, tablelock.WithTracerProvider(tp))
		key := fmt.Sprintf("traces/%x", rand.Uint64())
		for _, lock := range []func(context.Context, string) (*rwlock.Lease, error){rw.RLock, rw.Lock} {
			l, err := lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string][]string{
			"sqllock.acquire": {"rwlock", "rwlock"},
			"sqllock.lease":   {"rwlock", "rwlock"},
			"sqllock.release": {"rwlock", "rwlock"},
		}
		if got := locktest.Spans(rec); !reflect.DeepEqual(got, want) {
			t.Errorf("spans by name, with their strategy: %v, want %v", got, want)
		}
	})
}
