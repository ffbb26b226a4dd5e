package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestExpGrowsWithinBounds(t *testing.T) {
	e := Exp{Min: 4 * time.Millisecond, Max: 32 * time.Millisecond}
	steps := []time.Duration{4, 8, 16, 32, 32}
	for i, s := range steps {
		s *= time.Millisecond
		if got := e.Step(); got != s {
			t.Fatalf("step %d = %v, want %v", i, got, s)
		}
		if d := e.Next(); d < s/2 || d > s {
			t.Fatalf("pause %d = %v, want within [%v, %v]", i, d, s/2, s)
		}
	}
	e.Reset()
	if e.Step() != e.Min {
		t.Fatalf("step after Reset = %v, want %v", e.Step(), e.Min)
	}
	e.AtMax()
	if e.Step() != e.Max {
		t.Fatalf("step after AtMax = %v, want %v", e.Step(), e.Max)
	}
	e.Cap(8 * time.Millisecond)
	if e.Step() != 8*time.Millisecond {
		t.Fatalf("step after Cap(8ms) = %v, want 8ms", e.Step())
	}
	e.Cap(time.Millisecond)
	if e.Step() != e.Min {
		t.Fatalf("step after Cap below Min = %v, want %v", e.Step(), e.Min)
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Sleep outlived its context")
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep of 1ms = %v", err)
	}
}

func TestRetry(t *testing.T) {
	transient := errors.New("transient")
	final := errors.New("final")
	calls := 0
	err := Retry(context.Background(), Exp{Min: time.Microsecond, Max: time.Millisecond},
		func(err error) bool { return errors.Is(err, transient) },
		func(context.Context) error {
			calls++
			if calls < 3 {
				return transient
			}
			return final
		})
	if !errors.Is(err, final) || calls != 3 {
		t.Fatalf("Retry = %v after %d calls, want final after 3", err, calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = Retry(ctx, Exp{Min: time.Millisecond, Max: 5 * time.Millisecond},
		func(error) bool { return true },
		func(context.Context) error { return transient })
	if !errors.Is(err, transient) || ctx.Err() == nil {
		t.Fatalf("Retry under a deadline = %v (ctx %v), want the last transient error after the deadline", err, ctx.Err())
	}
}
