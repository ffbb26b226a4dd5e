package election_test

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
	"github.com/sqllock/sqllock/tablelock"
)

// An election records under its own name, one outcome and one waiter per
// Campaign, and a leadership as its lease.
func TestMetrics(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		const n = 3
		ctx := t.Context()
		r := locktest.NewReader(t)
		e := newElection(t, db, tablelock.WithMeterProvider(r.MP), tablelock.WithTTL(2*time.Second))
		name := fmt.Sprintf("metrics/%x", rand.Uint64())
		base := []attribute.KeyValue{attribute.String("sqllock.strategy", "election"), attribute.String("db.system", locktest.System(db.Dialect))}
		acquired, released := 0, 0
		for i := range n {
			ld, err := e.Campaign(ctx, name, fmt.Sprint("n", i))
			if err != nil {
				t.Fatal(err)
			}
			if err := ld.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			acquired++
			released++
		}
		// While one leads: a campaigner that gives up, and one that takes
		// over at the resignation.
		leader, err := e.Campaign(ctx, name, "leader")
		if err != nil {
			t.Fatal(err)
		}
		acquired++
		campaign := func(ctx context.Context) <-chan error {
			got := make(chan error, 1)
			go func() {
				ld, err := e.Campaign(ctx, name, "next")
				if err == nil {
					err = ld.Resign(context.WithoutCancel(ctx))
				}
				got <- err
			}()
			return got
		}
		cctx, cancel := context.WithCancel(ctx)
		got := campaign(cctx)
		r.WaitCount(t, 1, "sqllock.waiters", base...)
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled Campaign: %v", err)
		}
		got = campaign(ctx)
		r.WaitCount(t, 1, "sqllock.waiters", base...)
		if w := locktest.Count(r.Collect(t), "sqllock.waiters"); w != 1 {
			t.Errorf("one blocked Campaign: sqllock.waiters = %d over every attribute, want 1", w)
		}
		if err := leader.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("blocked Campaign: %v", err)
		}
		acquired++
		released += 2

		// One loss: the leadership's lock row deleted.
		ld, err := e.Campaign(ctx, name, "lost")
		if err != nil {
			t.Fatal(err)
		}
		acquired++
		locktest.DeleteRow(t, db, tablelock.DefaultTable, ld.Key())
		select {
		case <-ld.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the leadership outlived its row")
		}
		if err := ld.Resign(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Resign after the loss: %v, want ErrLockLost", err)
		}

		// The goroutine that found the loss may still be recording it.
		r.WaitCount(t, 1, "sqllock.lease.lost")
		rm := r.Collect(t)
		locktest.OnlyStrategy(t, rm, "election")
		locktest.CheckTally(t, rm, "election", db.Dialect, locktest.Tally{
			Acquired: acquired, NotAcquired: 0, Canceled: 1, Held: released + 1, Lost: 1,
		})
	})
}

// A Campaign makes one acquire span and its leadership one lease span,
// and Resign one release span, under the election's name.
func TestTraces(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := t.Context()
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		e := newElection(t, db, tablelock.WithTracerProvider(tp))
		ld, err := e.Campaign(ctx, fmt.Sprintf("traces/%x", rand.Uint64()), "v")
		if err != nil {
			t.Fatal(err)
		}
		if err := ld.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{
			"sqllock.acquire": {"election"},
			"sqllock.lease":   {"election"},
			"sqllock.release": {"election"},
		}
		if got := locktest.Spans(rec); !reflect.DeepEqual(got, want) {
			t.Errorf("spans by name, with their strategy: %v, want %v", got, want)
		}
	})
}
