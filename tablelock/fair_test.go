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
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
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

// goneEntry is the queue entry of a fair waiter of a Locker that died, a
// sqllock_waiter in PostgreSQL's text form: a grant gives owner "gone" on
// host "nowhere" the key for ttl.
func goneEntry(ttl time.Duration) string {
	return fmt.Sprintf("(00000000deadbeef,%d,gone,nowhere)", ttl.Microseconds())
}

// headEntry returns the entry first in key's queue, a sqllock_waiter as
// text.
func headEntry(t *testing.T, db *testdb.DB, table, key string) string {
	t.Helper()
	var e string
	if err := db.QueryRow("SELECT waiters[1]::text FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1", key).Scan(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

// queueFirst puts entry, a sqllock_waiter as text, at the head of key's
// queue.
func queueFirst(t *testing.T, db *testdb.DB, table, key, entry string) {
	t.Helper()
	_, err := db.Exec("UPDATE "+pgx.Identifier{table}.Sanitize()+" SET waiters = array_prepend($2::sqllock_waiter, waiters) WHERE lock_key = $1", key, entry)
	if err != nil {
		t.Fatal(err)
	}
}

// TestFairGrantToGone: a release grants the key to the entry first in the
// queue, even one whose Locker died: the key is held by that entry's owner,
// under a larger token, for the entry's lease, as if a holder had died
// holding it, and then comes back. A Locker queued behind the gone one is
// served after it.
func TestFairGrantToGone(t *testing.T) {
	db, table, opts := fairTable(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	const lease = time.Second

	t.Run("TryAcquire", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		queueFirst(t, db, table, key, goneEntry(lease))
		released := time.Now()
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var owner, host string
		var token int64
		if err := db.QueryRow("SELECT owner, host, token FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1", key).Scan(&owner, &host, &token); err != nil {
			t.Fatal(err)
		}
		if owner != "gone" || host != "nowhere" || token <= a.Token() {
			t.Fatalf("after the release the row names %q on %q under token %d; want the gone entry's owner and host, above %d", owner, host, token, a.Token())
		}
		_, err = holder.TryAcquire(ctx, key)
		if !errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), "nowhere") || !strings.Contains(err.Error(), key) {
			t.Fatalf("TryAcquire of a key granted to a gone Locker = %v; want refused, naming the key and the grantee's host", err)
		}
		for {
			l, err := holder.TryAcquire(ctx, key)
			if err == nil {
				if l.Token() <= token {
					t.Errorf("token %d after the grant's lease, not above the grant's %d", l.Token(), token)
				}
				l.Release(ctx)
				break
			}
			if !errors.Is(err, sqllock.ErrNotAcquired) || time.Since(released) > 10*time.Second {
				t.Fatalf("the key granted to a gone Locker does not come back: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if held := time.Since(released); held < lease-100*time.Millisecond {
			t.Errorf("the key came back %v after the release; the grant's lease is %v", held, lease)
		}
	})

	t.Run("queued behind", func(t *testing.T) {
		key := locktest.Key(t)
		a, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
		got := acquireAndRelease(ctx, waiter, key)
		waitQueued(t, db, table, key, 1)
		queueFirst(t, db, table, key, goneEntry(lease))
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		served(t, got, "the Locker queued behind a gone one was not served")
	})
}

// TestFairQuitterLeaves: a waiter whose Acquire gave up leaves the row's
// queue, so no release grants it the key. And a grant that reaches its
// Locker after it gave up (its leaving raced the release) is given back
// by that Locker's listening session: the key goes to the entry queued
// next, with a grant of its own.
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
	quitterEntry := headEntry(t, db, table, key)
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
			t.Fatalf("the waiter that gave up is still queued: %v", queued)
		}
	}

	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	got := acquireAndRelease(ctx, waiter, key)
	next := waitQueued(t, db, table, key, 1)[0]
	// The quitter queued ahead again, as when its leaving raced a refusal
	// of its own; its listening session lingers.
	queueFirst(t, db, table, key, quitterEntry)
	ln.hear(t, next)
	ln.hear(t, gone)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The release's grant to the quitter (and its copy to the waiter,
	// queued next), then the quitter's session's grant, giving it back, to
	// the waiter.
	if p := ln.next(t, 10*time.Second); !ln.granted || ln.callee != gone || !strings.HasSuffix(p, key) {
		t.Fatalf("heard %q for %q; want the grant of %q to the quitter", p, ln.callee, key)
	}
	for {
		p := ln.next(t, 10*time.Second)
		if !ln.granted || !strings.HasSuffix(p, key) {
			t.Fatalf("heard %q; want grants of %q only", p, key)
		}
		if ln.callee == next {
			break
		}
		if ln.callee != gone {
			t.Fatalf("heard a grant for %q; want the quitter's, then the waiter's", ln.callee)
		}
	}
	served(t, got, "the waiter the grant was passed to was not served")
}

// TestFairConformance: fair Lockers pass the suite every Locker passes,
// mutual exclusion among goroutines of two Lockers included: a grant is a
// take made by the release, under the same row lock.
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

// TestFairGrantHeldWithoutClaim: a waiter granted the key soon after its
// take queued it holds the grant as it is, without a claim of its own
// (the row still names its entry as called, and expires with the claim
// window), and its renewal keeps the key past the window: nobody else
// takes it, and the lease is not lost.
func TestFairGrantHeldWithoutClaim(t *testing.T) {
	db, table, opts := fairTable(t)
	const window = time.Second
	opts = append(opts, tablelock.WithClaimWindow(window))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	other := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	key := locktest.Key(t)
	first, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan sqllock.Lease, 1)
	errs := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key)
		if err != nil {
			errs <- err
			return
		}
		got <- l
	}()
	waitQueued(t, db, table, key, 1)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var l sqllock.Lease
	select {
	case l = <-got:
	case err := <-errs:
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	row := func() (called bool, left time.Duration) {
		t.Helper()
		var us int64
		if err := db.QueryRow("SELECT called IS NOT NULL, (extract(epoch FROM expires_at - now()) * 1000000)::bigint FROM "+pgx.Identifier{table}.Sanitize()+" WHERE lock_key = $1 AND token = $2", key, l.Token()).Scan(&called, &us); err != nil {
			t.Fatal(err)
		}
		return called, time.Duration(us) * time.Microsecond
	}
	if called, left := row(); !called || left > window {
		t.Fatalf("after the grant the row has called set: %v, and %v left; want the grant unclaimed, within its window %v", called, left, window)
	}
	for end := time.Now().Add(5 * window / 2); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if o, err := other.TryAcquire(ctx, key); err == nil {
			o.Release(ctx)
			t.Fatal("another Locker took the key held by a grant without a claim")
		} else if !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatal(err)
		}
		if err := l.Err(); err != nil {
			t.Fatalf("the lease of a grant held without a claim ended: %v", err)
		}
	}
	if _, left := row(); left < time.Minute {
		t.Fatalf("%v left on the row past the claim window; want it renewed to the TTL", left)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := other.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	o.Release(ctx)
}
