// Package locktest is the conformance suite every sqllock strategy runs on
// every dialect it serves. A strategy test builds a Target and calls Run.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// Target describes one strategy on one database.
type Target struct {
	DB *testdb.DB
	// New returns a fresh Locker; the suite closes nothing, so New registers
	// its own t.Cleanup.
	New func(t testing.TB) sqllock.Locker
	// Steal takes a held lease away from outside its holder (deleting the
	// row, killing the session). Nil skips the loss tests.
	Steal func(t testing.TB, l sqllock.Lease)
	// LossWithin bounds how long after Steal the lease must report the loss.
	LossWithin time.Duration
	// Reentrant: the same owner (sqllock.WithOwner) may acquire a key twice.
	Reentrant bool
	// Exclusive: the Locker gives mutual exclusion while held (false for
	// the optimistic strategy, which only detects conflicts).
	Exclusive bool
	// Kept is how many connections a Locker keeps of its own, once it has
	// held a key, until Close (tablelock's lane on SQLite).
	Kept int
}

// Key returns a key unique to the test.
func Key(t testing.TB) string {
	k := fmt.Sprintf("%s/%x", t.Name(), rand.Uint64())
	if len(k) > sqllock.MaxKeyLen {
		k = k[len(k)-sqllock.MaxKeyLen:]
	}
	return k
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, tg Target) {
	if tg.LossWithin == 0 {
		tg.LossWithin = 5 * time.Second
	}
	t.Run("AcquireRelease", func(t *testing.T) { testAcquireRelease(t, tg) })
	t.Run("InvalidKey", func(t *testing.T) { testInvalidKey(t, tg) })
	t.Run("DoubleRelease", func(t *testing.T) { testDoubleRelease(t, tg) })
	t.Run("FencingMonotonic", func(t *testing.T) { testFencing(t, tg) })
	t.Run("Close", func(t *testing.T) { testClose(t, tg) })
	if !tg.Exclusive {
		return
	}
	t.Run("OneWinnerOfN", func(t *testing.T) { testOneWinner(t, tg) })
	t.Run("TryAcquireRefused", func(t *testing.T) { testTryRefused(t, tg) })
	t.Run("AcquireWaitsForRelease", func(t *testing.T) { testWaits(t, tg) })
	t.Run("Cancellation", func(t *testing.T) { testCancel(t, tg) })
	t.Run("MutualExclusion", func(t *testing.T) { testMutex(t, tg) })
	t.Run("NoConnectionLeak", func(t *testing.T) { testNoLeak(t, tg) })
	if tg.Reentrant {
		t.Run("Reentrancy", func(t *testing.T) { testReentrant(t, tg) })
	}
	if tg.Steal != nil {
		t.Run("LossClosesDone", func(t *testing.T) { testLoss(t, tg) })
		t.Run("DoCancelsOnLoss", func(t *testing.T) { testDoLoss(t, tg) })
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t testing.TB, ctx context.Context, l sqllock.Locker, key string) sqllock.Lease {
	t.Helper()
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return lease
}

func testAcquireRelease(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	lease := mustAcquire(t, ctx, l, key)
	if lease.Key() != key {
		t.Errorf("Key() = %q, want %q", lease.Key(), key)
	}
	if lease.Token() <= 0 {
		t.Errorf("Token() = %d, want > 0", lease.Token())
	}
	if err := lease.Err(); err != nil {
		t.Errorf("Err() while held = %v", err)
	}
	select {
	case <-lease.Done():
		t.Fatal("Done() closed while held")
	default:
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-lease.Done():
	case <-time.After(time.Second):
		t.Fatal("Done() not closed after Release")
	}
	if err := lease.Err(); !errors.Is(err, sqllock.ErrReleased) {
		t.Errorf("Err() after Release = %v, want ErrReleased", err)
	}
	// The key is free again.
	again, err := l.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	if again.Token() <= lease.Token() {
		t.Errorf("token after re-acquire %d not above %d", again.Token(), lease.Token())
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func testInvalidKey(t *testing.T, tg Target) {
	ctx, l := ctxT(t), tg.New(t)
	for _, key := range []string{"", strings.Repeat("k", sqllock.MaxKeyLen+1), "bad\xff", "nul\x00"} {
		for name, f := range map[string]func(context.Context, string) (sqllock.Lease, error){"Acquire": l.Acquire, "TryAcquire": l.TryAcquire} {
			lease, err := f(ctx, key)
			if !errors.Is(err, sqllock.ErrInvalidKey) {
				t.Errorf("%s(%.20q...) = %v, %v; want ErrInvalidKey", name, key, lease, err)
			}
		}
	}
	// The longest valid key works.
	long := Key(t)
	long += strings.Repeat("x", sqllock.MaxKeyLen-len(long))
	lease, err := l.TryAcquire(ctx, long)
	if err != nil {
		t.Fatalf("TryAcquire of a %d-byte key: %v", len(long), err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func testDoubleRelease(t *testing.T, tg Target) {
	ctx, l := ctxT(t), tg.New(t)
	lease := mustAcquire(t, ctx, l, Key(t))
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	err := lease.Release(ctx)
	if !errors.Is(err, sqllock.ErrReleased) {
		t.Fatalf("second Release = %v, want ErrReleased", err)
	}
	if !strings.Contains(err.Error(), lease.Key()) {
		t.Errorf("error %q does not name the key", err)
	}
}

func testFencing(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	var last int64
	for i := range 20 {
		lease := mustAcquire(t, ctx, l, key)
		if lease.Token() <= last {
			t.Fatalf("round %d: token %d not above previous %d", i, lease.Token(), last)
		}
		last = lease.Token()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func testOneWinner(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	const n = 32
	var wins, refused atomic.Int32
	var mu sync.Mutex
	var leases []sqllock.Lease
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			lease, err := l.TryAcquire(ctx, key)
			switch {
			case err == nil:
				wins.Add(1)
				mu.Lock()
				leases = append(leases, lease)
				mu.Unlock()
			case errors.Is(err, sqllock.ErrNotAcquired):
				refused.Add(1)
			default:
				t.Errorf("TryAcquire: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || refused.Load() != n-1 {
		t.Fatalf("%d winners and %d refused of %d, want 1 and %d", wins.Load(), refused.Load(), n, n-1)
	}
	for _, lease := range leases {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func testTryRefused(t *testing.T, tg Target) {
	ctx, key := ctxT(t), Key(t)
	a, b := tg.New(t), tg.New(t)
	lease := mustAcquire(t, ctx, a, key)
	defer lease.Release(ctx)
	for _, l := range []sqllock.Locker{a, b} {
		begin := time.Now()
		got, err := l.TryAcquire(ctx, key)
		if !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held key = %v, %v; want ErrNotAcquired", got, err)
		}
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name the key", err)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("refusal %v looks like a context error", err)
		}
		if d := time.Since(begin); d > 5*time.Second {
			t.Errorf("TryAcquire took %v: it must not wait", d)
		}
	}
}

func testWaits(t *testing.T, tg Target) {
	ctx, key := ctxT(t), Key(t)
	a, b := tg.New(t), tg.New(t)
	first := mustAcquire(t, ctx, a, key)
	got := make(chan sqllock.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		lease, err := b.Acquire(ctx, key)
		if err != nil {
			errc <- err
			return
		}
		got <- lease
	}()
	select {
	case <-got:
		t.Fatal("Acquire returned while the key was held")
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(150 * time.Millisecond):
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case second := <-got:
		if second.Token() <= first.Token() {
			t.Errorf("waiter's token %d not above holder's %d", second.Token(), first.Token())
		}
		if err := second.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not granted the key within 10s of the release")
	}
}

func testCancel(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	lease := mustAcquire(t, ctx, l, key)
	defer lease.Release(ctx)

	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	got, err := l.Acquire(tctx, key)
	if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v, %v; want ErrNotAcquired joined with DeadlineExceeded", got, err)
	}
	cctx, cancel2 := context.WithCancel(ctx)
	cancel2()
	got, err = l.Acquire(cctx, Key(t))
	if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = %v, %v; want ErrNotAcquired and Canceled", got, err)
	}
}

// testMutex: goroutines on two Lockers contend for one key; inside the
// critical section each reads the shared counter, pauses and writes it
// back. Any overlap loses an increment.
func testMutex(t *testing.T, tg Target) {
	ctx, key := ctxT(t), Key(t)
	lockers := []sqllock.Locker{tg.New(t), tg.New(t)}
	const workers, rounds = 8, 15
	var counter int
	var inside atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			l := lockers[w%len(lockers)]
			for range rounds {
				lease, err := l.Acquire(ctx, key)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				v := counter
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				counter = v + 1
				inside.Add(-1)
				if err := lease.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if counter != workers*rounds {
		t.Fatalf("counter = %d, want %d: two holders overlapped", counter, workers*rounds)
	}
}

func testNoLeak(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	lease := mustAcquire(t, ctx, l, key)
	for range 20 {
		if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryAcquire = %v", err)
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		_, err := l.Acquire(c, key)
		cancel()
		if !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("Acquire = %v", err)
		}
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Refused and cancelled attempts hand their connections back at once;
	// the Locker's own come back at Close.
	inUseAtMost(t, tg.DB, tg.Kept, "after refused and cancelled attempts")
	if c, ok := l.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		inUseAtMost(t, tg.DB, 0, "after Close")
	}
}

// inUseAtMost waits up to 5 s for db's pool to have at most n connections
// in use.
func inUseAtMost(t *testing.T, db *testdb.DB, n int, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for db.Stats().InUse > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still in use %s, want at most %d", db.Stats().InUse, when, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testReentrant(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	mine := sqllock.WithOwner(ctx, "owner-a-"+fmt.Sprint(rand.Uint32()))
	theirs := sqllock.WithOwner(ctx, "owner-b-"+fmt.Sprint(rand.Uint32()))
	one := mustAcquire(t, mine, l, key)
	two, err := l.TryAcquire(mine, key)
	if err != nil {
		t.Fatalf("re-acquire by the same owner: %v", err)
	}
	refuse := func(when string) {
		t.Helper()
		if lease, err := l.TryAcquire(theirs, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("%s: another owner got %v, %v; want ErrNotAcquired", when, lease, err)
		}
	}
	refuse("held twice")
	if err := two.Release(ctx); err != nil {
		t.Fatal(err)
	}
	refuse("held once")
	if err := one.Err(); err != nil {
		t.Fatalf("first lease after the second was released: %v", err)
	}
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := l.TryAcquire(theirs, key)
	if err != nil {
		t.Fatalf("after both releases another owner is refused: %v", err)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func testLoss(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	lease := mustAcquire(t, ctx, l, key)
	tg.Steal(t, lease)
	select {
	case <-lease.Done():
	case <-time.After(tg.LossWithin):
		t.Fatalf("Done() not closed within %v of the loss", tg.LossWithin)
	}
	if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
		t.Fatalf("Err() after loss = %v, want ErrLockLost", err)
	}
	if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
		t.Fatalf("Release after loss = %v, want ErrLockLost", err)
	}
	if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
		t.Fatalf("second Release after loss = %v, want ErrReleased", err)
	}
	// The key can be taken again, with a larger token.
	next, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= lease.Token() {
		t.Errorf("token after loss %d not above %d", next.Token(), lease.Token())
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func testDoLoss(t *testing.T, tg Target) {
	ctx, l, key := ctxT(t), tg.New(t), Key(t)
	var sawCause error
	err := sqllock.Do(ctx, l, key, func(fctx context.Context) error {
		lease, ok := sqllock.LeaseFrom(fctx)
		if !ok {
			return errors.New("no lease in Do's context")
		}
		if tok, _ := sqllock.TokenFrom(fctx); tok != lease.Token() {
			return fmt.Errorf("TokenFrom = %d, lease token %d", tok, lease.Token())
		}
		tg.Steal(t, lease)
		select {
		case <-fctx.Done():
			sawCause = context.Cause(fctx)
			return fctx.Err()
		case <-time.After(tg.LossWithin):
			return errors.New("fn's context not cancelled after the loss")
		}
	})
	if !errors.Is(sawCause, sqllock.ErrLockLost) {
		t.Errorf("context.Cause in fn = %v, want ErrLockLost", sawCause)
	}
	if !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("Do = %v, want ErrLockLost", err)
	}
}

// testClose: Close is the same in every strategy. It ends every lease the
// Locker holds as lost (Done closes, Err and the first Release match
// ErrLockLost), frees their keys for others, wakes a blocked Acquire of
// the Locker with ErrClosed, refuses later calls with ErrClosed, and is
// idempotent.
func testClose(t *testing.T, tg Target) {
	ctx, key, other := ctxT(t), Key(t), Key(t)
	l := tg.New(t)
	c, ok := l.(io.Closer)
	if !ok {
		t.Fatalf("%T is not an io.Closer", l)
	}
	held := mustAcquire(t, ctx, l, key)
	blocked := make(chan error, 1)
	if tg.Exclusive {
		// A second owner of the same Locker blocks on the held key.
		go func() {
			lease, err := l.Acquire(sqllock.WithOwner(ctx, fmt.Sprintf("closer-%x", rand.Uint64())), key)
			if err == nil {
				lease.Release(ctx)
			}
			blocked <- err
		}()
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a held lease's Done() still open after Close")
	}
	if err := held.Err(); !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("held lease's Err() after Close = %v, want ErrLockLost", err)
	}
	if tg.Exclusive {
		select {
		case err := <-blocked:
			if !errors.Is(err, sqllock.ErrClosed) || !errors.Is(err, sqllock.ErrNotAcquired) {
				t.Errorf("Acquire blocked across Close = %v, want ErrClosed and ErrNotAcquired", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not wake a blocked Acquire")
		}
	}
	for name, f := range map[string]func(context.Context, string) (sqllock.Lease, error){"Acquire": l.Acquire, "TryAcquire": l.TryAcquire} {
		if lease, err := f(ctx, other); !errors.Is(err, sqllock.ErrClosed) {
			t.Errorf("%s after Close = %v, %v; want ErrClosed", name, lease, err)
		} else if !strings.Contains(err.Error(), other) {
			t.Errorf("%s after Close: error %q does not name the key", name, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := held.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
		t.Errorf("Release of a lease ended by Close = %v, want ErrLockLost", err)
	}
	if err := held.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
		t.Errorf("second Release = %v, want ErrReleased", err)
	}
	if !tg.Exclusive {
		return
	}
	// The key is free for everyone else at once.
	next, err := tg.New(t).TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire by another Locker after Close: %v", err)
	}
	if next.Token() <= held.Token() {
		t.Errorf("token after Close %d not above %d", next.Token(), held.Token())
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
