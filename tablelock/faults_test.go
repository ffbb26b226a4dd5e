package tablelock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// forNetworked runs fn for each dialect that has a network to break.
func forNetworked(t *testing.T, fn func(t *testing.T, d sqllock.Dialect)) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		t.Run(d.String(), func(t *testing.T) { fn(t, d) })
	}
}

// Reset connections and an outage shorter than the renewal slack are not
// loss: the renewal retries on a new connection and the lease lives on.
func TestTransientFaultsAreNotLoss(t *testing.T) {
	forNetworked(t, func(t *testing.T, d sqllock.Dialect) {
		p := testdb.NewProxy(t, d)
		ctx := context.Background()
		const ttl = 1500 * time.Millisecond
		l := newLocker(t, p.DB, tablelock.WithTTL(ttl))
		key := locktest.Key(t)
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		before := rowState(t, p.DB, tablelock.DefaultTable, key)
		// Reset every connection several times across two TTLs.
		for range 8 {
			time.Sleep(ttl / 4)
			p.Drop()
		}
		// Then a short outage: nothing gets through for 200ms.
		p.Cut()
		time.Sleep(200 * time.Millisecond)
		p.Restore()
		time.Sleep(ttl / 2)
		if err := lease.Err(); err != nil {
			t.Fatalf("lease lost to transient faults: %v", err)
		}
		after := rowState(t, p.DB, tablelock.DefaultTable, key)
		if after == "" || ownerOf(after) != ownerOf(before) {
			t.Fatalf("row changed hands: before %s, after %s", before, after)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release after transient faults: %v", err)
		}
	})
}

func ownerOf(state string) string {
	for i := range state {
		if state[i] == '|' {
			return state[:i]
		}
	}
	return state
}

// A holder cut off from the database (a partition, or a server that went
// away) counts its lease lost before the database hands the key to anyone
// else, and a write fenced by its token would then be refused.
func TestPartitionedHolderIsToldFirst(t *testing.T) {
	forNetworked(t, func(t *testing.T, d sqllock.Dialect) {
		p := testdb.NewProxy(t, d)
		direct := testdb.Open(t, d)
		ctx := context.Background()
		const ttl = time.Second
		holder := newLocker(t, p.DB, tablelock.WithTTL(ttl))
		other := newLocker(t, direct, tablelock.WithTTL(ttl))
		key := locktest.Key(t)
		lease, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		toldAt := make(chan time.Time, 1)
		go func() {
			<-lease.Done()
			toldAt <- time.Now()
		}()
		p.Cut()
		defer p.Restore()
		wctx, cancel := context.WithTimeout(ctx, 10*ttl)
		defer cancel()
		next, err := other.Acquire(wctx, key)
		if err != nil {
			t.Fatalf("key did not come back after the holder was cut off: %v", err)
		}
		gotAt := time.Now()
		// Err reads the lease's own deadline: it must already say lost.
		if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("another holder has the key but the cut-off holder's Err() = %v", err)
		}
		select {
		case at := <-toldAt:
			if !at.Before(gotAt) {
				t.Errorf("Done() closed %v after the key changed hands", at.Sub(gotAt))
			}
			t.Logf("holder told %v before the next holder got the key", gotAt.Sub(at))
		case <-time.After(ttl):
			t.Fatal("Done() not closed although the key changed hands")
		}
		if next.Token() <= lease.Token() {
			t.Errorf("next token %d not above the lost lease's %d", next.Token(), lease.Token())
		}
		p.Restore()
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Release of the lost lease = %v, want ErrLockLost", err)
		}
		// The stale holder's release did not free the new holder's key.
		if err := next.Err(); err != nil {
			t.Fatalf("new holder hurt by the stale release: %v", err)
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A take whose answer comes back late (a slow network, a paused client)
// leaves its lease less than a renew interval before its deadline: the
// holder is still told (Done) before anyone else can have the key, though
// no renewal was due yet.
func TestLateTakeToldByDeadline(t *testing.T) {
	forNetworked(t, func(t *testing.T, d sqllock.Dialect) {
		x := testdb.NewToxi(t, d)
		x.SetMaxOpenConns(1)
		ctx := context.Background()
		// Renewals every ttl/3, so the first is due 1s after the take
		// returns, by when the database would hand the key on.
		const ttl, late = 3 * time.Second, 2200 * time.Millisecond
		holder := newLocker(t, x.DB, tablelock.WithTTL(ttl))
		other := newLocker(t, testdb.Open(t, d), tablelock.WithTTL(ttl))
		key := locktest.Key(t)
		warm, err := holder.TryAcquire(ctx, key) // statements prepared on the one connection
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}
		x.Add(t, "late", "latency", "downstream", map[string]any{"latency": late.Milliseconds()})
		lease, err := holder.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		x.Reset()
		wctx, cancel := context.WithTimeout(ctx, 3*ttl)
		defer cancel()
		next, err := other.Acquire(wctx, key)
		if err != nil {
			t.Fatalf("the key did not come back: %v", err)
		}
		select {
		case <-lease.Done():
		default:
			t.Fatalf("another holder has the key and the late holder's Done is still open (Err %v)", lease.Err())
		}
		if !errors.Is(lease.Err(), sqllock.ErrLockLost) {
			t.Fatalf("Err() = %v, want ErrLockLost", lease.Err())
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
