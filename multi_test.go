package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// Take both accounts of a transfer as one lease. Whatever order callers
// name the keys in, they are taken in one global order, so two transfers
// between the same accounts in opposite directions queue instead of
// deadlocking.
func ExampleAcquireAll() {
	dir, _ := os.MkdirTemp("", "sqllock-example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "locks.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := migrations.Up(ctx, db, sqllock.SQLite); err != nil {
		log.Fatal(err)
	}
	locker, err := tablelock.New(db, sqllock.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := sqllock.AcquireAll(ctx, locker, "account/bob", "account/alice", "account/bob")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	fmt.Println("holding", lease.Keys())
	alice, _ := lease.Part("account/alice")
	bob, _ := lease.Part("account/bob")
	fmt.Println("tokens", alice.Token(), bob.Token(), "lease token", lease.Token())
	// Output:
	// holding [account/alice account/bob]
	// tokens 1 2 lease token 2
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newTableLocker(t testing.TB, db *testdb.DB, opts ...tablelock.Option) *tablelock.Locker {
	t.Helper()
	l, err := tablelock.New(db.DB, db.Dialect, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// multiTarget is a strategy that waits, and so can deadlock.
//
// optimistic is not among them: its Acquire never waits and never
// excludes (it stamps a version and detects overlap at Release), so no
// caller waits for another, no wait-for cycle can form, and there is no
// exclusion whose deadlock key order could prevent. AcquireAll works over
// it all the same.
type multiTarget struct {
	name     string
	dialects []sqllock.Dialect
	new      func(t testing.TB, db *testdb.DB) sqllock.Locker
}

var servers = []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB}

var multiTargets = []multiTarget{
	{"tablelock", testdb.Dialects, func(t testing.TB, db *testdb.DB) sqllock.Locker { return newTableLocker(t, db) }},
	{"rowlock", servers, func(t testing.TB, db *testdb.DB) sqllock.Locker {
		l, err := rowlock.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}},
	{"advisory", servers, func(t testing.TB, db *testdb.DB) sqllock.Locker {
		l, err := advisory.New(db.DB, db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}},
}

// forEachTarget runs fn per strategy and dialect. The dialects of one
// strategy run in parallel (they are different servers); the strategies
// run one after another, so no server carries two workloads at once.
func forEachTarget(t *testing.T, fn func(t *testing.T, db *testdb.DB, tg multiTarget)) {
	for _, tg := range multiTargets {
		t.Run(tg.name, func(t *testing.T) {
			for _, d := range tg.dialects {
				t.Run(d.String(), func(t *testing.T) {
					t.Parallel()
					fn(t, testdb.Open(t, d), tg)
				})
			}
		})
	}
}

// The workload of the deadlock tests: 16 goroutines, each round taking 2 to
// 5 random keys of 10, in random order.
const (
	mkWorkers = 16
	mkKeys    = 10
)

type workload struct {
	keys     [mkKeys]string
	counters [mkKeys]int          // incremented non-atomically under the lease
	inside   [mkKeys]atomic.Int32 // holders of each key right now: never above 1
	made     [mkKeys]atomic.Int64 // increments made, for the final count
}

func newWorkload(t testing.TB) *workload {
	w := &workload{}
	base := locktest.Key(t)
	for i := range w.keys {
		w.keys[i] = fmt.Sprintf("%s/%d", base, i)
	}
	return w
}

// pick returns 2 to 5 distinct key indexes in random order.
func (w *workload) pick(rng *rand.Rand) []int {
	return rng.Perm(mkKeys)[:2+rng.IntN(4)]
}

func (w *workload) names(idx []int) []string {
	keys := make([]string, len(idx))
	for j, i := range idx {
		keys[j] = w.keys[i]
	}
	return keys
}

// critical is the section run under keys idx: each key's counter is read,
// the goroutine pauses, and the counter is written back. A second holder of
// any key trips inside, loses an increment, or is reported by the race
// detector (the atomic inside counter is the only happens-before edge
// between holders, so overlapping holders race on the plain counter).
func (w *workload) critical(t testing.TB, idx []int) {
	vals := make([]int, len(idx))
	for j, i := range idx {
		if n := w.inside[i].Add(1); n != 1 {
			t.Errorf("key %d: %d holders at once", i, n)
		}
		vals[j] = w.counters[i]
	}
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	for j, i := range idx {
		w.counters[i] = vals[j] + 1
		w.made[i].Add(1)
		w.inside[i].Add(-1)
	}
}

// check compares each key's counter with the increments made.
func (w *workload) check(t testing.TB) {
	t.Helper()
	for i := range w.keys {
		if got, want := w.counters[i], int(w.made[i].Load()); got != want {
			t.Errorf("key %d: counter %d, want %d: two holders overlapped", i, got, want)
		}
	}
}

// Through AcquireAll the workload never deadlocks: no call times out (each
// is allowed 20s, the whole run lasts about 2s), and every key's counter is
// exact.
func TestAcquireAllNoDeadlock(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *testdb.DB, tg multiTarget) {
		ctx, w := ctxFor(t), newWorkload(t)
		// Two Lockers, so exclusion goes through the server, not only
		// through a Locker's own bookkeeping.
		lockers := []sqllock.Locker{tg.new(t, db), tg.new(t, db)}
		stop := time.Now().Add(2 * time.Second)
		var rounds atomic.Int64
		var wg sync.WaitGroup
		for g := range mkWorkers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(g)))
				l := lockers[g%len(lockers)]
				for time.Now().Before(stop) {
					idx := w.pick(rng)
					keys := w.names(idx)
					actx, cancel := context.WithTimeout(ctx, 20*time.Second)
					lease, err := sqllock.AcquireAll(actx, l, keys...)
					cancel()
					if err != nil {
						t.Errorf("worker %d: AcquireAll of %d keys: %v", g, len(keys), err)
						return
					}
					if got := lease.Keys(); len(got) != len(keys) || !slices.IsSorted(got) {
						t.Errorf("worker %d: lease keys %q for %q", g, got, keys)
					}
					w.critical(t, idx)
					if err := lease.Release(ctx); err != nil {
						t.Errorf("worker %d: Release: %v", g, err)
						return
					}
					rounds.Add(1)
				}
			})
		}
		wg.Wait()
		w.check(t)
		if rounds.Load() < mkWorkers {
			t.Errorf("%d rounds for %d workers: some worker never completed one", rounds.Load(), mkWorkers)
		}
		t.Logf("%d rounds through AcquireAll", rounds.Load())
	})
}

// waitGraph records who holds each key and who waits for which, to see a
// deadlock as it forms.
type waitGraph struct {
	mu      sync.Mutex
	holder  [mkKeys]int    // worker+1 holding each key; 0: none
	waiting [mkWorkers]int // key+1 each worker waits for; 0: none
}

func (g *waitGraph) wait(w, key int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting[w] = key + 1
}

func (g *waitGraph) hold(w, key int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting[w] = 0
	g.holder[key] = w + 1
}

func (g *waitGraph) free(key int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holder[key] = 0
}

// cycle reports whether some worker's wait runs into a cycle: it waits
// for a key held by a worker that waits for a key held by ..., back to one
// already seen. A holder is recorded only after its Acquire returned and
// cleared before its Release, so the graph never shows a hold the database
// does not have: a cycle here is a real deadlock, which nothing but a
// cancel breaks.
func (g *waitGraph) cycle() bool {
	for w := range mkWorkers {
		if g.deadlocked(w) {
			return true
		}
	}
	return false
}

func (g *waitGraph) deadlocked(w int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	var seen [mkWorkers]bool
	for cur := w; !seen[cur]; {
		seen[cur] = true
		k := g.waiting[cur] - 1
		if k < 0 {
			return false
		}
		h := g.holder[k] - 1
		if h < 0 {
			return false
		}
		cur = h
	}
	return true
}

// The hazard AcquireAll removes: the same workload taking its keys one by
// one, in the order picked, deadlocks. A watcher reads the wait graph; a
// cycle in it (each worker waiting for a key the next holds) is a deadlock,
// and the first one ends the test by cancelling every wait; a deadlock
// error from the database counts too. The test fails if none happens in
// 30s, so it shows that the order, not luck, kept TestAcquireAllNoDeadlock
// alive. No wait has a timeout of its own: on a loaded machine a timed-out
// wait dropped its connection (a cancelled statement leaves it unsafe to
// reuse), every round then waited on connection startup, and no round
// completed.
func TestAcquireOneByOneDeadlocks(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *testdb.DB, tg multiTarget) {
		w := newWorkload(t)
		// A rowlock lease is a connection: keep them pooled for the test.
		db.SetMaxIdleConns(mkWorkers * 5)
		t.Cleanup(func() { db.SetMaxIdleConns(2) })
		var graph waitGraph
		lockers := []sqllock.Locker{tg.new(t, db), tg.new(t, db)}
		// Long enough for a loaded machine: the first deadlock ends it.
		relCtx := ctxFor(t)
		ctx, stop := context.WithTimeout(relCtx, 30*time.Second)
		defer stop()
		var deadlocks, dbDeadlocks, rounds atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if graph.cycle() {
					deadlocks.Add(1)
					stop()
					return
				}
			}
		})
		for g := range mkWorkers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(g)))
				l := lockers[g%len(lockers)]
				for ctx.Err() == nil {
					idx := w.pick(rng)
					var held []sqllock.Lease
					var failed bool
					for _, i := range idx {
						graph.wait(g, i)
						lease, err := l.Acquire(ctx, w.keys[i])
						if err != nil {
							switch {
							case dberr.IsDeadlock(err):
								dbDeadlocks.Add(1)
								stop()
							case ctx.Err() == nil:
								t.Errorf("worker %d: Acquire: %v", g, err)
							}
							graph.wait(g, -1)
							failed = true
							break
						}
						graph.hold(g, i)
						held = append(held, lease)
					}
					if !failed {
						w.critical(t, idx)
						rounds.Add(1)
					}
					for j := len(held) - 1; j >= 0; j-- {
						graph.free(idx[j])
						if err := held[j].Release(relCtx); err != nil {
							t.Errorf("worker %d: Release: %v", g, err)
						}
					}
				}
			})
		}
		wg.Wait()
		w.check(t)
		t.Logf("one by one: %d deadlocks seen in the wait graph, %d deadlock errors, %d rounds completed",
			deadlocks.Load(), dbDeadlocks.Load(), rounds.Load())
		if deadlocks.Load()+dbDeadlocks.Load() == 0 {
			t.Errorf("no deadlock in %d rounds taking keys one by one in random order: the test no longer shows what AcquireAll's order buys", rounds.Load())
		}
	})
}

// recLocker records the calls AcquireAll makes on a real Locker.
type recLocker struct {
	sqllock.Locker
	mu  sync.Mutex
	log []string
}

func (r *recLocker) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recLocker) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

func (r *recLocker) Acquire(ctx context.Context, key string) (sqllock.Lease, error) {
	r.note("acquire " + key)
	return r.wrap(r.Locker.Acquire(ctx, key))
}

func (r *recLocker) TryAcquire(ctx context.Context, key string) (sqllock.Lease, error) {
	r.note("try " + key)
	return r.wrap(r.Locker.TryAcquire(ctx, key))
}

func (r *recLocker) wrap(l sqllock.Lease, err error) (sqllock.Lease, error) {
	if err != nil {
		return nil, err
	}
	return &recLease{Lease: l, r: r}, nil
}

type recLease struct {
	sqllock.Lease
	r *recLocker
}

func (l *recLease) Release(ctx context.Context) error {
	l.r.note("release " + l.Key())
	return l.Lease.Release(ctx)
}

// Bad key lists are refused before anything is taken, with an error
// matching ErrInvalidKey that says what is wrong.
func TestAcquireAllBadInput(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxFor(t)
		rec := &recLocker{Locker: newTableLocker(t, db)}
		base := locktest.Key(t)
		if _, err := sqllock.AcquireAll(ctx, nil, base); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("AcquireAll(nil locker) = %v, want ErrInvalidOption", err)
		}
		if err := sqllock.DoAll(ctx, rec, []string{base}, nil); !errors.Is(err, sqllock.ErrInvalidOption) {
			t.Errorf("DoAll(nil fn) = %v, want ErrInvalidOption", err)
		}
		tooMany := make([]string, sqllock.MaxKeys+1)
		for i := range tooMany {
			tooMany[i] = fmt.Sprintf("%s/%d", base, i)
		}
		cases := []struct {
			name string
			keys []string
			says string
		}{
			{"no keys", nil, "no keys"},
			{"empty list", []string{}, "no keys"},
			{"too many", tooMany, fmt.Sprint(sqllock.MaxKeys)},
			{"empty key", []string{base + "/a", ""}, `key ""`},
			{"long key", []string{base + "/a", strings.Repeat("k", sqllock.MaxKeyLen+1)}, "exceeds the limit"},
			{"bad UTF-8", []string{base + "/a", "bad\xff"}, `key "bad\xff"`},
			{"NUL", []string{"nul\x00", base + "/a"}, `key "nul\x00"`},
		}
		for _, c := range cases {
			for op, f := range map[string]func(context.Context, sqllock.Locker, ...string) (*sqllock.MultiLease, error){
				"AcquireAll": sqllock.AcquireAll, "TryAcquireAll": sqllock.TryAcquireAll,
			} {
				lease, err := f(ctx, rec, c.keys...)
				if !errors.Is(err, sqllock.ErrInvalidKey) || !strings.Contains(err.Error(), c.says) {
					t.Errorf("%s: %s = %v, %v; want ErrInvalidKey saying %q", c.name, op, lease, err, c.says)
				}
			}
			if err := sqllock.DoAll(ctx, rec, c.keys, func(context.Context) error { return nil }); !errors.Is(err, sqllock.ErrInvalidKey) {
				t.Errorf("%s: DoAll = %v, want ErrInvalidKey", c.name, err)
			}
		}
		if ev := rec.events(); len(ev) != 0 {
			t.Fatalf("refused lists reached the Locker: %q", ev)
		}

		// The limit counts distinct keys: MaxKeys of them, each named twice,
		// is accepted.
		twice := append(slices.Clone(tooMany[:sqllock.MaxKeys]), tooMany[:sqllock.MaxKeys]...)
		lease, err := sqllock.TryAcquireAll(ctx, rec, twice...)
		if err != nil {
			t.Fatalf("TryAcquireAll of %d distinct keys, each twice: %v", sqllock.MaxKeys, err)
		}
		if n := len(lease.Keys()); n != sqllock.MaxKeys {
			t.Errorf("lease holds %d keys, want %d", n, sqllock.MaxKeys)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Duplicate keys are taken once, not twice: rowlock is not reentrant, and
// a second Acquire of its own key would wait for itself.
func TestAcquireAllDuplicates(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *testdb.DB, tg multiTarget) {
		ctx := ctxFor(t)
		rec := &recLocker{Locker: tg.new(t, db)}
		a, b := locktest.Key(t)+"/a", locktest.Key(t)+"/b"
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		lease, err := sqllock.AcquireAll(actx, rec, b, a, b, a, a)
		if err != nil {
			t.Fatalf("AcquireAll with duplicates: %v", err)
		}
		if got, want := lease.Keys(), []string{min(a, b), max(a, b)}; !slices.Equal(got, want) {
			t.Errorf("Keys() = %q, want %q", got, want)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{"acquire " + min(a, b), "acquire " + max(a, b), "release " + max(a, b), "release " + min(a, b)}
		if ev := rec.events(); !slices.Equal(ev, want) {
			t.Fatalf("calls %q, want %q", ev, want)
		}
	})
}

// A failure part-way releases what was taken, in reverse order, and names
// the key that failed; TryAcquireAll takes all or none.
func TestAcquireAllRollsBack(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxFor(t)
		base := locktest.Key(t)
		k1, k2, k3 := base+"/1", base+"/2", base+"/3"
		other := newTableLocker(t, db)
		blocker, err := other.Acquire(ctx, k2)
		if err != nil {
			t.Fatal(err)
		}
		free := func(key string) {
			t.Helper()
			l, err := other.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("%s still held after the failed call: %v", key, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}

		rec := &recLocker{Locker: newTableLocker(t, db)}
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		lease, err := sqllock.AcquireAll(actx, rec, k3, k1, k2)
		cancel()
		if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AcquireAll past its deadline = %v, %v; want ErrNotAcquired and DeadlineExceeded", lease, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("acquire all: key %q", k2)) {
			t.Errorf("error %q does not name the key that failed, %q", err, k2)
		}
		if ev, want := rec.events(), []string{"acquire " + k1, "acquire " + k2, "release " + k1}; !slices.Equal(ev, want) {
			t.Errorf("calls %q, want %q", ev, want)
		}
		free(k1)
		free(k3)

		rec = &recLocker{Locker: rec.Locker}
		lease, err = sqllock.TryAcquireAll(ctx, rec, k3, k2, k1)
		if !errors.Is(err, sqllock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Fatalf("TryAcquireAll with a key held = %v, %v; want ErrNotAcquired alone", lease, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("key %q", k2)) {
			t.Errorf("error %q does not name %q", err, k2)
		}
		if ev, want := rec.events(), []string{"try " + k1, "try " + k2, "release " + k1}; !slices.Equal(ev, want) {
			t.Errorf("calls %q, want %q", ev, want)
		}
		free(k1)

		if err := blocker.Release(ctx); err != nil {
			t.Fatal(err)
		}
		rec = &recLocker{Locker: rec.Locker}
		lease, err = sqllock.TryAcquireAll(ctx, rec, k2, k3, k1)
		if err != nil {
			t.Fatalf("TryAcquireAll of free keys: %v", err)
		}
		if err := lease.Err(); err != nil {
			t.Errorf("Err() while held = %v", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		want := []string{"try " + k1, "try " + k2, "try " + k3, "release " + k3, "release " + k2, "release " + k1}
		if ev := rec.events(); !slices.Equal(ev, want) {
			t.Errorf("calls %q, want %q (release in reverse order)", ev, want)
		}
		select {
		case <-lease.Done():
		default:
			t.Error("Done() open after Release")
		}
		if err := lease.Err(); !errors.Is(err, sqllock.ErrReleased) {
			t.Errorf("Err() after Release = %v, want ErrReleased", err)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Errorf("second Release = %v, want ErrReleased", err)
		}
		free(k1)
		free(k2)
		free(k3)
	})
}

// Losing one key ends the whole lease: Done closes, Err names the key, and
// DoAll cancels its function. The other keys stay held until Release.
func TestMultiLeaseLoss(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		ctx := ctxFor(t)
		base := locktest.Key(t)
		keys := []string{base + "/c", base + "/a", base + "/b"}
		l := newTableLocker(t, db, tablelock.WithTTL(600*time.Millisecond))
		other := newTableLocker(t, db)

		lease, err := sqllock.AcquireAll(ctx, l, keys...)
		if err != nil {
			t.Fatal(err)
		}
		var top int64
		for _, k := range keys {
			p, ok := lease.Part(k)
			if !ok || p.Key() != k {
				t.Fatalf("Part(%q) = %v, %v", k, p, ok)
			}
			top = max(top, p.Token())
		}
		if lease.Token() != top {
			t.Errorf("Token() = %d, want the largest part token %d", lease.Token(), top)
		}
		if _, ok := lease.Part(base + "/none"); ok {
			t.Error("Part of a key not held reported ok")
		}
		b, _ := lease.Part(base + "/b")
		if _, err := l.ForceRelease(ctx, base+"/b", b.Token()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lease.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done() not closed after a key was lost")
		}
		err = lease.Err()
		if !errors.Is(err, sqllock.ErrLockLost) || !strings.Contains(err.Error(), fmt.Sprintf("%q", base+"/b")) {
			t.Fatalf("Err() after the loss = %v; want ErrLockLost naming %q", err, base+"/b")
		}
		// The others are still held: the caller's work may still run under them.
		if p, err := other.TryAcquire(ctx, base+"/a"); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("a key not lost was given back before Release: %v, %v", p, err)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrLockLost) {
			t.Fatalf("Release after the loss = %v, want ErrLockLost", err)
		}
		if err := lease.Err(); !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("Err() after Release = %v, want the loss kept", err)
		}
		if err := lease.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Fatalf("second Release = %v, want ErrReleased", err)
		}
		for _, k := range keys {
			p, err := other.TryAcquire(ctx, k)
			if err != nil {
				t.Fatalf("%s after Release: %v", k, err)
			}
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// DoAll: fn's context ends with the loss as its cause.
		var cause error
		err = sqllock.DoAll(ctx, l, keys, func(ctx context.Context) error {
			all, _ := sqllock.LeaseFrom(ctx)
			c, _ := all.(*sqllock.MultiLease).Part(base + "/c")
			if _, err := l.ForceRelease(ctx, base+"/c", c.Token()); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
			case <-time.After(5 * time.Second):
				return errors.New("fn's context not cancelled after the loss")
			}
			return nil
		})
		if !errors.Is(cause, sqllock.ErrLockLost) || !strings.Contains(cause.Error(), fmt.Sprintf("%q", base+"/c")) {
			t.Errorf("context.Cause in fn = %v, want ErrLockLost naming the key", cause)
		}
		if !errors.Is(err, sqllock.ErrLockLost) {
			t.Errorf("DoAll = %v, want ErrLockLost", err)
		}
	})
}
