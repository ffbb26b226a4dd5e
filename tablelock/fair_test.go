package tablelock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// fairTable makes a lock table of the test's own on PostgreSQL, and
// returns the options of a fair Locker on it (leases that outlive the
// test).
func fairTable(t *testing.T) (*testdb.DB, string, []tablelock.Option) {
	t.Helper()
	db := testdb.Open(t, sqllock.Postgres)
	table := privateTable(t, db)
	return db, table, []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(2 * time.Minute), tablelock.WithFairness(true)}
}

// TestFairOrder: with WithFairness, waiting Lockers get the key in the
// order they queued, one of them in another process, and the holder that
// releases and asks again at once goes last instead of taking the key
// back. The tokens tell the order: each holder's is larger than the one
// before. Without fairness the releaser's TryAcquire cuts in and comes
// first.
func TestFairOrder(t *testing.T) {
	db, table, opts := fairTable(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	key := locktest.Key(t)
	first, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	tokens := map[int64]string{} // token -> who held under it
	took := func(who string, l sqllock.Lease) {
		mu.Lock()
		tokens[l.Token()] = who
		mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wait := func(who string, l *tablelock.Locker) {
		wg.Go(func() {
			lease, err := l.Acquire(ctx, key)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", who, err)
				return
			}
			took(who, lease)
			time.Sleep(5 * time.Millisecond)
			if err := lease.Release(context.Background()); err != nil {
				errs <- fmt.Errorf("%s: %w", who, err)
			}
		})
	}
	// Each waiter queues in the row before the next starts; the third is
	// another process.
	var child *childWaiter
	for i, who := range []string{"w0", "w1", "child", "w3"} {
		if who == "child" {
			child = startChildWaiter(t, table, key)
		} else {
			wait(who, newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...))
		}
		waitQueued(t, db, table, key, i+1)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// At once, before the Locker called can answer: a cut-in.
	if l, err := holder.TryAcquire(ctx, key); err == nil {
		took("releaser cutting in", l)
		l.Release(ctx)
	}
	wait("releaser", holder)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tok, err := child.token()
	if err != nil {
		t.Fatal(err)
	}
	tokens[tok] = "child"
	order := make([]string, 0, len(tokens))
	for _, tk := range slices.Sorted(func(yield func(int64) bool) {
		for tk := range tokens {
			if !yield(tk) {
				return
			}
		}
	}) {
		order = append(order, tokens[tk])
	}
	if want := []string{"w0", "w1", "child", "w3", "releaser"}; !slices.Equal(order, want) {
		t.Fatalf("served in the order %v; want %v, the order they queued", order, want)
	}
}

// childWaiter is a waiter in another process (TestFairWaiterChild).
type childWaiter struct {
	done chan struct{}
	out  []byte
	err  error
}

func startChildWaiter(t *testing.T, table, key string) *childWaiter {
	t.Helper()
	cmd := testdb.Child(t, "TestFairWaiterChild", envFairChild+"="+table+"/"+key)
	c := &childWaiter{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.out, c.err = cmd.CombinedOutput()
	}()
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		<-c.done
	})
	return c
}

var childToken = regexp.MustCompile(`fair-token=(\d+)`)

// token waits for the child and returns the token it held the key under.
func (c *childWaiter) token() (int64, error) {
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		return 0, errors.New("the waiter process did not finish")
	}
	if c.err != nil {
		return 0, fmt.Errorf("waiter process: %v\n%s", c.err, c.out)
	}
	m := childToken.FindSubmatch(c.out)
	if m == nil {
		return 0, fmt.Errorf("waiter process printed no token:\n%s", c.out)
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

const envFairChild = "TABLELOCK_FAIR_CHILD"

func TestFairWaiterChild(t *testing.T) {
	v := os.Getenv(envFairChild)
	if v == "" {
		t.Skip("the child of TestFairOrder")
	}
	table, key, _ := strings.Cut(v, "/")
	l := newLocker(t, testdb.Open(t, sqllock.Postgres), tablelock.WithTable(table), tablelock.WithFairness(true))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("fair-token=%d\n", lease.Token())
	time.Sleep(5 * time.Millisecond)
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestFairPromiseRunsOut: a key released to a queued Locker that never
// answers (gone) is refused to others only for a while. A TryAcquire is
// told the key is promised, and gets it once the promise has run out; a
// Locker queued behind the gone one is served too.
func TestFairPromiseRunsOut(t *testing.T) {
	db, table, opts := fairTable(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	queueGone := func(key string) {
		t.Helper()
		// A Locker that queued and then died: its id, and no one behind it.
		_, err := db.Exec("UPDATE "+pgx.Identifier{table}.Sanitize()+" SET waiters = array_prepend('00000000deadbeef', waiters) WHERE lock_key = $1", key)
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("TryAcquire", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		queueGone(key)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = holder.TryAcquire(ctx, key)
		if !errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), "promised") || !strings.Contains(err.Error(), key) {
			t.Fatalf("TryAcquire just after a release that called a queued Locker = %v; want refused as promised, naming the key", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			l, err := holder.TryAcquire(ctx, key)
			if err == nil {
				l.Release(ctx)
				break
			}
			if !errors.Is(err, sqllock.ErrNotAcquired) || time.Now().After(deadline) {
				t.Fatalf("the promise to a gone Locker does not run out: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("queued behind", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		queueGone(key)
		waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
		got := acquireAndRelease(ctx, waiter, key)
		waitQueued(t, db, table, key, 2)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		served(t, got, "the Locker queued behind a gone one was not served")
	})
}

// TestFairQuitterLeaves: a Locker whose Acquire gave up leaves the row's
// queue, so no release calls it. And a called Locker that no longer waits,
// but still listens, passes its turn to the Locker queued next: a call of
// that Locker, not an announcement to all, which would send every waiter
// to a row still promised to the one that gave up.
func TestFairQuitterLeaves(t *testing.T) {
	db, table, opts := fairTable(t)
	ln := listen(t, db, table)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	key := locktest.Key(t)
	a, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	quitter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	qctx, qcancel := context.WithCancel(ctx)
	quit := make(chan error, 1)
	go func() {
		_, err := quitter.Acquire(qctx, key)
		quit <- err
	}()
	gone := waitQueued(t, db, table, key, 1)[0]
	qcancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Fatalf("the quitter's Acquire = %v, want it cancelled", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		queued, err := queuedIn(db, table, key)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(queued, gone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Locker that gave up is still queued: %v", queued)
		}
	}

	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	got := acquireAndRelease(ctx, waiter, key)
	next := waitQueued(t, db, table, key, 1)[0]
	// The quitter queued ahead again, as when its leaving raced a refusal
	// of its own; its listening session lingers.
	if _, err := db.Exec("UPDATE "+pgx.Identifier{table}.Sanitize()+" SET waiters = array_prepend($2::text, waiters) WHERE lock_key = $1", key, gone); err != nil {
		t.Fatal(err)
	}
	ln.hear(t, next)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The copy of the release's call of the quitter, then the quitter's
	// call of the waiter.
	if k := ln.next(t, 10*time.Second); k != key || ln.callee != gone {
		t.Fatalf("heard %q calling %q; want the copy of the call of %q", k, ln.callee, gone)
	}
	if k := ln.next(t, 10*time.Second); k != key || ln.callee != next {
		t.Fatalf("heard %q calling %q; want the turn passed on to %q", k, ln.callee, next)
	}
	served(t, got, "the Locker the turn was passed to was not served")
}

// TestFairConformance: fair Lockers pass the suite every Locker passes,
// mutual exclusion among goroutines of two Lockers included: the promise
// changes the take's statement, never who may hold a live row.
func TestFairConformance(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	conformance(t, db, tablelock.WithFairness(true))
}

// TestFairnessRefused: fair order is refused where it cannot be kept, with
// an error that says why, and the lock table is left alone.
func TestFairnessRefused(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		fair := tablelock.WithFairness(true)
		if db.Dialect != sqllock.Postgres {
			_, err := tablelock.New(db.DB, db.Dialect, fair)
			if !errors.Is(err, sqllock.ErrUnsupported) || !strings.Contains(err.Error(), "queue") {
				t.Fatalf("New with fairness on %v = %v; want ErrUnsupported saying why", db.Dialect, err)
			}
			return
		}
		for name, opts := range map[string][]tablelock.Option{
			"without notify":   {fair, tablelock.WithNotify(false)},
			"through a pooler": {fair, tablelock.WithTransactionPooler()},
		} {
			_, err := tablelock.New(db.DB, db.Dialect, opts...)
			if !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), "LISTEN") {
				t.Errorf("%s: New = %v; want ErrInvalidOption naming LISTEN", name, err)
			}
		}
		// A driver that cannot LISTEN: refused at the first Acquire that
		// would wait, not served out of order.
		other := testdb.OpenHidden(t)
		l, err := tablelock.New(other.DB, other.Dialect, fair)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Acquire(context.Background(), locktest.Key(t)); !errors.Is(err, sqllock.ErrUnsupported) || !strings.Contains(err.Error(), "pgx") {
			t.Fatalf("Acquire with fairness through a driver that cannot listen = %v; want ErrUnsupported naming pgx", err)
		}
	})
}
