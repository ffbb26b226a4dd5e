package rwlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// TestConformance runs every statement a read and a write take, on each
// dialect, from two RWLocks: readers overlap and refuse a writer, a
// waiting writer is granted when the last reader goes, with a token above
// theirs, and refuses readers while it holds; a reader after it has a
// larger token, and no row is held after the last Release. .ci/step-roles
// runs it as the application role of the README's "Roles and grants".
func TestConformance(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxT(t)
		a, b := newRW(t, db), newRW(t, db)
		key := locktest.Key(t)
		r1, err := a.RLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := b.TryRLock(ctx, key)
		if err != nil {
			t.Fatalf("a second reader: %v", err)
		}
		if _, err := a.TryLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), key) {
			t.Fatalf("a writer beside readers: %v; want ErrNotAcquired naming the key", err)
		}

		got := make(chan *rwlock.Lease, 1)
		go func() {
			w, err := b.Lock(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		select {
		case <-got:
			t.Fatal("a writer was granted the key while readers held it")
		case <-time.After(150 * time.Millisecond):
		}
		for _, r := range []*rwlock.Lease{r1, r2} {
			if err := r.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var w *rwlock.Lease
		select {
		case w = <-got:
		case <-ctx.Done():
			t.Fatal("the writer was not granted the key after the readers went")
		}
		if w == nil {
			return
		}
		if w.Token() <= max(r1.Token(), r2.Token()) {
			t.Errorf("writer's token %d not above the readers' %d and %d", w.Token(), r1.Token(), r2.Token())
		}
		if _, err := a.TryRLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), key) {
			t.Fatalf("a reader beside the writer: %v; want ErrNotAcquired naming the key", err)
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r3, err := a.TryRLock(ctx, key)
		if err != nil {
			t.Fatalf("a reader after the writer: %v", err)
		}
		if r3.Token() <= w.Token() {
			t.Errorf("reader's token %d not above the writer's %d", r3.Token(), w.Token())
		}
		if err := r3.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := heldRows(t, db, key); n != 0 {
			t.Fatalf("%d rows of the key held after every Release", n)
		}
	})
}

// heldRows counts key's gate and reader rows held, as the table shows them.
func heldRows(t *testing.T, db *testdb.DB, key string) int {
	t.Helper()
	l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTable(semaphore.DefaultTable))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held, err := l.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, h := range held {
		if strings.HasPrefix(h.Key, key) {
			n++
		}
	}
	return n
}
