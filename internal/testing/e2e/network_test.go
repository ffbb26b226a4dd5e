package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// toxics are the network faults of TestNetworkFaults, as toxiproxy names
// them, each on both directions of every connection through the proxy.
var toxics = []struct {
	name, typ string
	attrs     map[string]any
}{
	{"latency", "latency", map[string]any{"latency": 275, "jitter": 225}}, // 50-500 ms
	{"reset_peer", "reset_peer", map[string]any{"timeout": 0}},
	{"timeout", "timeout", map[string]any{"timeout": 1000}}, // a black hole, closed after 1s
	{"slow_close", "slow_close", map[string]any{"delay": 500}},
	{"bandwidth", "bandwidth", map[string]any{"rate": 1}}, // 1 KB/s
}

// TestNetworkFaults puts a fault between a holder and the server, from
// before its Acquire through its renewals or checks to its Release, while a
// probe on a direct connection keeps trying for the key. Whatever the
// fault: the holder either holds (Acquire returned a lease that is not
// lost) or is told, and a tablelock holder is told before the probe gets
// the key (its lease counts itself lost on the database clock's expiry
// minus a margin); a session holder (advisory, rowlock) whose session the
// fault ended is told too, after which the probe may have the key, with a
// larger token, so the fence refuses the stale holder; the holder's Release
// under the fault never frees the probe's key; the Lockers end with
// nothing leaked (goleak in TestMain, no connection in use).
func TestNetworkFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("network faults take about a minute")
	}
	type strategy struct {
		name      string
		newLocker func(t testing.TB, db *testdb.DB, probe bool) sqllock.Locker
		session   bool // the key goes with the server session
	}
	strategies := []strategy{
		{"tablelock", func(t testing.TB, db *testdb.DB, probe bool) sqllock.Locker {
			// Only the holder's lease is under test. The probe's is long,
			// so that a renewal slowed by a loaded machine cannot end it
			// and pass for harm done by the holder's late Release (which
			// the probe's checks see in the row either way).
			ttl := 1500 * time.Millisecond
			if probe {
				ttl = time.Minute
			}
			l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}, false},
		{"advisory", func(t testing.TB, db *testdb.DB, _ bool) sqllock.Locker {
			l, err := advisory.New(db.DB, db.Dialect, advisory.WithCheckInterval(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}, true},
		{"rowlock", func(t testing.TB, db *testdb.DB, _ bool) sqllock.Locker {
			l, err := rowlock.New(db.DB, db.Dialect, rowlock.WithCheckInterval(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}, true},
	}
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB} {
		for _, st := range strategies {
			for _, tx := range toxics {
				for _, ph := range []phase{duringAcquire, duringHold, duringRelease} {
					t.Run(fmt.Sprintf("%v/%s/%s/%s", d, st.name, tx.name, ph), func(t *testing.T) {
						direct := testdb.Open(t, d)
						proxy := testdb.NewToxi(t, d)
						probe := st.newLocker(t, direct, true)
						holder := st.newLocker(t, proxy.DB, false)
						inject := func() {
							proxy.Add(t, tx.name+"-up", tx.typ, "upstream", tx.attrs)
							proxy.Add(t, tx.name+"-down", tx.typ, "downstream", tx.attrs)
						}
						networkFault(t, holder, probe, proxy, locktest.Key(t), st.session, ph, inject)
						proxy.Reset()
						// Every lease has ended: nothing may keep a connection,
						// once the clean-ups bounded by their timeouts are done.
						deadline := time.Now().Add(10 * time.Second)
						for proxy.Stats().InUse > 0 && time.Now().Before(deadline) {
							time.Sleep(50 * time.Millisecond)
						}
						if n := proxy.Stats().InUse; n > 0 {
							t.Errorf("%d connections still in use through the proxy 10s after the leases ended", n)
						}
					})
				}
			}
		}
	}
}

// phase is when the fault starts.
type phase string

const (
	duringAcquire phase = "acquire"
	duringHold    phase = "renewal" // tablelock renews, advisory and rowlock check
	duringRelease phase = "release"
)

func networkFault(t *testing.T, holder, probe sqllock.Locker, proxy *testdb.Toxi, key string, session bool, ph phase, inject func()) {
	ctx := context.Background()
	if ph == duringAcquire {
		inject()
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	lease, err := holder.Acquire(actx, key)
	cancel()
	if err != nil {
		t.Logf("Acquire under the fault: %v", err)
		// Not acquired: nothing of it may be left holding the key.
		next, err := acquireBounded(probe, key, 10*time.Second)
		if err != nil {
			t.Fatalf("a failed Acquire left the key held: %v", err)
		}
		next.Release(ctx)
		return
	}
	if ph == duringHold {
		inject()
	}
	// The probe tries for about two renewal periods of the holder.
	var next sqllock.Lease
	deadline := time.Now().Add(2 * time.Second)
	for next == nil && time.Now().Before(deadline) {
		l, err := probe.TryAcquire(ctx, key)
		switch {
		case err == nil:
			next = l
		case !errors.Is(err, sqllock.ErrNotAcquired):
			t.Fatalf("probe: %v", err)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	if next != nil {
		if !session {
			// On the lease's own deadline: it must already say lost.
			if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
				t.Fatalf("the probe holds the key but the holder's Err() = %v", err)
			}
		} else {
			select {
			case <-lease.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("the probe holds the key but the holder was not told within 5s")
			}
			if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
				t.Fatalf("holder's Err() = %v after its key changed hands, want ErrLockLost", err)
			}
		}
		if next.Token() <= lease.Token() {
			t.Fatalf("probe's token %d not above the stale holder's %d: a fence would accept the stale holder", next.Token(), lease.Token())
		}
		t.Logf("key changed hands under the fault; the holder was told: %v", lease.Err())
	} else if err := lease.Err(); err != nil {
		t.Logf("holder told of a loss the probe did not see take the key: %v", err)
	} else {
		t.Logf("held and renewed through the fault")
	}
	if ph == duringRelease {
		inject()
	}
	// Release under the fault, bounded; it may fail, but must not free
	// the probe's key.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	rerr := lease.Release(rctx)
	cancel()
	t.Logf("Release under the fault: %v", rerr)
	if next != nil {
		if err := next.Err(); err != nil {
			t.Fatalf("the stale holder's Release hurt the probe's lease: %v", err)
		}
		if l, err := probe.TryAcquire(sqllock.WithOwner(ctx, "someone-else"), key); err == nil {
			l.Release(ctx)
			t.Fatal("the stale holder's Release freed the probe's key")
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Reset()
	if next == nil {
		// The key comes back: released, or expired with the lost session.
		l, err := acquireBounded(probe, key, 10*time.Second)
		if err != nil {
			t.Fatalf("key not free after the holder's Release: %v", err)
		}
		// Statements of the holder's Release still held back by the
		// fault land now: they must not free the successor's key.
		time.Sleep(600 * time.Millisecond)
		if err := l.Err(); err != nil {
			t.Fatalf("the successor's lease ended after the holder's late Release: %v", err)
		}
		if l2, err := probe.TryAcquire(sqllock.WithOwner(ctx, "someone-else"), key); err == nil {
			l2.Release(ctx)
			t.Fatal("the holder's late Release freed the successor's key")
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func acquireBounded(l sqllock.Locker, key string, d time.Duration) (sqllock.Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Acquire(ctx, key)
}
