package tablelock_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// stallingHandler holds up the "lease lost" warning until let go.
type stallingHandler struct {
	entered chan struct{} // closed when the warning is being written
	letGo   chan struct{}
	once    sync.Once
}

func (h *stallingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *stallingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *stallingHandler) WithGroup(string) slog.Handler            { return h }

func (h *stallingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "tablelock: lease lost" {
		h.once.Do(func() { close(h.entered) })
		<-h.letGo
	}
	return nil
}

// TestErrWhileLossIsDeclared: the goroutine that finds a loss tells the
// leases last, after other work (here its warning, held up). Err and
// Release in that window already report the loss. They said nil before: a
// holder resumed from a pause past its lease, whose renewal goroutine woke
// at the same moment, did a step of work after another process had taken
// the key (TestPausedHolderLearnsOfLossOnResume, in CI).
func TestErrWhileLossIsDeclared(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := context.Background(), locktest.Key(t)
		h := &stallingHandler{entered: make(chan struct{}), letGo: make(chan struct{})}
		var letGo sync.Once
		free := func() { letGo.Do(func() { close(h.letGo) }) }
		t.Cleanup(free) // before the Locker's Close, which waits for the renewal
		l := newLocker(t, db, tablelock.WithTTL(time.Second), tablelock.WithLogger(slog.New(h)))
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		deleteRow(t, db, key) // the next renewal finds the row gone
		select {
		case <-h.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the loss was not declared")
		}
		if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Err() while the loss is being declared = %v, want ErrLockLost", err)
		}
		select {
		case <-lease.Done():
		default:
			t.Error("Done() not closed after Err() reported the loss")
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Release() while the loss is being declared = %v, want ErrLockLost", err)
		}
		free()
	})
}
