package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqllock/sqllock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestReleaseProtocol(t *testing.T) {
	var b Base
	b.Init("test", "k", 7)
	if b.Key() != "k" || b.Token() != 7 || b.Err() != nil || isClosed(b.Done()) {
		t.Fatalf("fresh lease: key %q token %d err %v", b.Key(), b.Token(), b.Err())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a deferred Release after the request ended
	calls := 0
	err := b.Release(ctx, func(ctx context.Context, lost error) error {
		calls++
		if ctx.Err() != nil {
			t.Errorf("free ran under an ended context: %v", ctx.Err())
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > ReleaseTimeout {
			t.Errorf("free ran without the release timeout (deadline %v, %v)", dl, ok)
		}
		if lost != nil {
			t.Errorf("free told of a loss %v on a live lease", lost)
		}
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("Release = %v after %d calls of free, want nil after 1", err, calls)
	}
	if !isClosed(b.Done()) || !errors.Is(b.Err(), sqllock.ErrReleased) {
		t.Fatalf("after Release: Done closed %v, Err %v", isClosed(b.Done()), b.Err())
	}
	err = b.Release(context.Background(), func(context.Context, error) error { calls++; return nil })
	if !errors.Is(err, sqllock.ErrReleased) || calls != 1 {
		t.Fatalf("second Release = %v (free called %d times), want ErrReleased without calling free", err, calls)
	}
	if b.Lose(b.Lost("late")) {
		t.Fatal("Lose after Release ended the lease again")
	}
}

func TestLossReportedFirst(t *testing.T) {
	var b Base
	b.Init("test", "k", 1)
	if !b.Lose(b.Lost("its row was deleted")) {
		t.Fatal("Lose on a live lease did nothing")
	}
	if !isClosed(b.Done()) || !errors.Is(b.Err(), sqllock.ErrLockLost) {
		t.Fatalf("after a loss: Done closed %v, Err %v", isClosed(b.Done()), b.Err())
	}
	var told error
	freeErr := errors.New("free failed")
	err := b.Release(context.Background(), func(_ context.Context, lost error) error { told = lost; return freeErr })
	if !errors.Is(err, sqllock.ErrLockLost) || errors.Is(err, freeErr) {
		t.Fatalf("first Release after a loss = %v, want the loss", err)
	}
	if !errors.Is(told, sqllock.ErrLockLost) {
		t.Fatalf("free was told %v, want the loss", told)
	}
	if err := b.Release(context.Background(), func(context.Context, error) error { return nil }); !errors.Is(err, sqllock.ErrReleased) {
		t.Fatalf("second Release after a loss = %v, want ErrReleased", err)
	}
	if !errors.Is(b.Err(), sqllock.ErrLockLost) {
		t.Fatalf("Err after loss and Release = %v, want the loss kept", b.Err())
	}
}

func TestFreeErrorReturned(t *testing.T) {
	var b Base
	b.Init("test", "k", 1)
	freeErr := errors.New("database down")
	if err := b.ReleaseIn(context.Background(), "release tx", func(context.Context, error) error { return freeErr }); !errors.Is(err, freeErr) {
		t.Fatalf("ReleaseIn = %v, want free's error", err)
	}
	if err := b.ReleaseIn(context.Background(), "release tx", nil); !errors.Is(err, sqllock.ErrReleased) {
		t.Fatalf("second ReleaseIn = %v, want ErrReleased", err)
	}
}
