package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// TestConformance runs every statement a permit takes, on each dialect,
// from two Semaphores: N permits at once on distinct slots, the next
// refused naming the key, Extend, a waiter granted the slot a Release
// frees with a larger token, and no row held after the last Release.
// .ci/step-roles runs it as the application role of the README's "Roles
// and grants".
func TestConformance(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const n = 2
		a, b := newSem(t, db), newSem(t, db)
		key := locktest.Key(t)
		p0, err := a.TryAcquire(ctx, key, n)
		if err != nil {
			t.Fatal(err)
		}
		p1, err := b.Acquire(ctx, key, n)
		if err != nil {
			t.Fatal(err)
		}
		if p0.Slot() == p1.Slot() {
			t.Fatalf("two permits on slot %d", p0.Slot())
		}
		if _, err := a.TryAcquire(ctx, key, n); !errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), key) {
			t.Fatalf("permit %d of %d: %v; want ErrNotAcquired naming the key", n+1, n, err)
		}
		if got := heldSlots(t, db, key); got != n {
			t.Fatalf("%d permit rows held, want %d", got, n)
		}
		if err := p0.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("Extend: %v", err)
		}

		got := make(chan *semaphore.Permit, 1)
		go func() {
			p, err := b.Acquire(ctx, key, n)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		select {
		case <-got:
			t.Fatal("a waiter was granted a permit while all were held")
		case <-time.After(150 * time.Millisecond):
		}
		if err := p0.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var p2 *semaphore.Permit
		select {
		case p2 = <-got:
		case <-ctx.Done():
			t.Fatal("the waiter was not granted the released permit")
		}
		if p2 == nil {
			return
		}
		if p2.Slot() != p0.Slot() || p2.Token() <= max(p0.Token(), p1.Token()) {
			t.Errorf("the waiter got slot %d token %d; want slot %d and a token above %d and %d",
				p2.Slot(), p2.Token(), p0.Slot(), p0.Token(), p1.Token())
		}
		for _, p := range []*semaphore.Permit{p1, p2} {
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := heldSlots(t, db, key); got != 0 {
			t.Fatalf("%d permit rows held after every Release", got)
		}
	})
}

// heldSlots counts key's permit rows held, as the permit table shows them.
func heldSlots(t *testing.T, db *testdb.DB, key string) int {
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
		if strings.HasPrefix(h.Key, key+"#") {
			n++
		}
	}
	return n
}
