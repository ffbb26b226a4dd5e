package rwlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/tablelock"
)

const (
	envRole    = "SQLLOCK_RW_ROLE"
	envDialect = "SQLLOCK_RW_DIALECT"
	envKey     = "SQLLOCK_RW_KEY"
	envTTL     = "SQLLOCK_RW_TTL"
)

const readers = 8

func newRW(t testing.TB, db *testdb.DB, opts ...tablelock.Option) *rwlock.RWLock {
	t.Helper()
	rw, err := rwlock.New(db.DB, db.Dialect, readers, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	return rw
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestChild is the body of the child processes; it does nothing in a
// normal run.
func TestChild(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("only runs as a child process of the rwlock tests")
	}
	d, err := sqllock.ParseDialect(os.Getenv(envDialect))
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	db := testdb.Open(t, d)
	rw := newRW(t, db, tablelock.WithTTL(ttl))
	ctx := context.Background()
	var l *rwlock.Lease
	if role == "reader" {
		l, err = rw.RLock(ctx, os.Getenv(envKey))
	} else {
		l, err = rw.Lock(ctx, os.Getenv(envKey))
	}
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("HELD %d\n", l.Token())
	if role != "fenced" {
		time.Sleep(time.Hour)
		return
	}
	locktest.FencedWrites(t, db, l.Key(), l.Token())
}

// TestPausedWriterFenced: a writer paused (SIGSTOP) past its TTL loses the
// key to a writer in another process, whose token is larger; the resumed
// writer's fenced write is refused.
func TestPausedWriterFenced(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		const ttl = 1500 * time.Millisecond
		key := locktest.Key(t)
		rw := newRW(t, db, tablelock.WithTTL(ttl))
		cmd := testdb.Child(t, "TestChild", envRole+"=fenced", envDialect+"="+db.Dialect.String(), envKey+"="+key, envTTL+"="+ttl.String())
		locktest.PausedHolderFenced(t, db, cmd, key, func(ctx context.Context) (int64, func(), error) {
			l, err := rw.Lock(ctx, key)
			if err != nil {
				return 0, nil, err
			}
			return l.Token(), func() { l.Release(ctx) }, nil
		})
	})
}

// Readers overlap, writers exclude everyone: a probe counts the holders
// of each kind; every writer's token exceeds every token seen before it.
func TestReadersWriters(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rw := newRW(t, db)
		ctx := ctxT(t)
		key := locktest.Key(t)
		var rd, wr, maxRd, bad atomic.Int64
		var mu sync.Mutex
		var lastEnded int64 // largest token of a hold already released
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for i := range 5 {
					write := (g+i)%3 == 0
					var l *rwlock.Lease
					var err error
					mu.Lock()
					before := lastEnded
					mu.Unlock()
					if write {
						l, err = rw.Lock(ctx, key)
					} else {
						l, err = rw.RLock(ctx, key)
					}
					if err != nil {
						t.Error(err)
						return
					}
					if write {
						if wr.Add(1) != 1 || rd.Load() != 0 {
							bad.Add(1)
						}
						if l.Token() <= before {
							t.Errorf("writer's token %d <= %d of an earlier hold", l.Token(), before)
						}
					} else {
						n := rd.Add(1)
						for m := maxRd.Load(); n > m && !maxRd.CompareAndSwap(m, n); m = maxRd.Load() {
						}
						if wr.Load() != 0 {
							bad.Add(1)
						}
					}
					time.Sleep(20 * time.Millisecond)
					if write {
						wr.Add(-1)
					} else {
						rd.Add(-1)
					}
					mu.Lock()
					lastEnded = max(lastEnded, l.Token())
					mu.Unlock()
					if err := l.Release(ctx); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("most readers at once: %d", maxRd.Load())
		if bad.Load() != 0 {
			t.Fatalf("%d times a writer held beside another holder", bad.Load())
		}
		if maxRd.Load() < 2 {
			t.Fatalf("readers never overlapped (at most %d at once)", maxRd.Load())
		}
	})
}

// A steady stream of overlapping readers does not starve a writer: once
// it waits, new readers wait behind it.
func TestWriterNotStarved(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rw := newRW(t, db)
		ctx := ctxT(t)
		key := locktest.Key(t)
		const hold = 100 * time.Millisecond
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var reads atomic.Int64
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					l, err := rw.RLock(ctx, key)
					if err != nil {
						t.Error(err)
						return
					}
					reads.Add(1)
					time.Sleep(hold)
					_ = l.Release(ctx)
				}
			})
		}
		time.Sleep(300 * time.Millisecond) // the stream is flowing
		start := time.Now()
		w, err := rw.Lock(ctx, key)
		took := time.Since(start)
		close(stop)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.TryRLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Errorf("a reader beside the writer: %v, want ErrNotAcquired", err)
		}
		_ = w.Release(ctx)
		wg.Wait()
		t.Logf("the writer waited %v behind a stream of readers holding %v each (%d reads)", took, hold, reads.Load())
		if took > 10*time.Second {
			t.Fatalf("the writer waited %v: starved", took)
		}
	})
}

// Reentrancy per owner: an owner reads again, a writer reads and writes
// again, all under one hold freed by the last Release; a reader asking to
// write is refused, not deadlocked. Without an owner nothing is reentrant.
func TestReentrant(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rw := newRW(t, db)
		ctx := ctxT(t)
		key := locktest.Key(t)
		octx := sqllock.WithOwner(ctx, "owner-a")
		w1, err := rw.Lock(octx, key)
		if err != nil {
			t.Fatal(err)
		}
		w2, err := rw.Lock(octx, key)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rw.TryRLock(octx, key)
		if err != nil {
			t.Fatal(err)
		}
		if w2.Token() != w1.Token() || r.Token() != w1.Token() {
			t.Errorf("one hold, tokens %d %d %d", w1.Token(), w2.Token(), r.Token())
		}
		if _, err := rw.TryRLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Errorf("another caller beside the writer: %v", err)
		}
		for _, l := range []*rwlock.Lease{w2, r} {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := w1.Err(); err != nil {
			t.Fatalf("the hold ended before its last Release: %v", err)
		}
		if err := w2.Err(); !errors.Is(err, sqllock.ErrReleased) {
			t.Errorf("Err of a released reentrant Lease: %v, want ErrReleased", err)
		}
		if err := w2.Release(ctx); !errors.Is(err, sqllock.ErrReleased) {
			t.Errorf("second Release: %v", err)
		}
		if err := w1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r1, err := rw.RLock(octx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.TryLock(octx, key); !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), key) {
			t.Errorf("an upgrade: %v, want ErrInvalidOption naming the key", err)
		}
		r2, err := rw.RLock(octx, key)
		if err != nil {
			t.Fatal(err)
		}
		_ = r2.Release(ctx)
		_ = r1.Release(ctx)
		w, err := rw.TryLock(ctx, key)
		if err != nil {
			t.Fatalf("the key is not free after every Release: %v", err)
		}
		_ = w.Release(ctx)
	})
}

// TestKilled: a reader or writer killed with SIGKILL frees the key within
// its TTL and one renewal interval.
func TestKilled(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		for _, role := range []string{"reader", "writer"} {
			t.Run(role, func(t *testing.T) {
				ctx := ctxT(t)
				const ttl = 2 * time.Second
				rw := newRW(t, db, tablelock.WithTTL(ttl))
				key := locktest.Key(t)
				cmd := testdb.Child(t, "TestChild", envRole+"="+role, envDialect+"="+db.Dialect.String(), envKey+"="+key, envTTL+"="+ttl.String())
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				sc := bufio.NewScanner(out)
				held := false
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "HELD ") {
						held = true
						break
					}
				}
				if !held {
					t.Fatal("the child never held the key")
				}
				if _, err := rw.TryLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
					t.Fatalf("a writer beside the child %s: %v", role, err)
				}
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed := time.Now()
				w, err := rw.Lock(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(killed)
				_ = w.Release(ctx)
				t.Logf("the killed %s's hold ended after %v (TTL %v)", role, took, ttl)
				if took > ttl+ttl/3+3*time.Second {
					t.Fatalf("freed after %v, want within TTL+renewal", took)
				}
			})
		}
	})
}

// Bad input names the key and the cause, and takes nothing.
func TestInput(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rw := newRW(t, db)
		ctx := ctxT(t)
		rows := func() (n int) {
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+rwlock.DefaultTable).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := rows()
		defer func() {
			if after := rows(); after != before {
				t.Errorf("bad input changed the table: %d rows, then %d", before, after)
			}
		}()
		for _, key := range []string{"", "a\x00b", strings.Repeat("k", sqllock.MaxKeyLen)} {
			for _, f := range []func(context.Context, string) (*rwlock.Lease, error){rw.RLock, rw.Lock, rw.TryRLock, rw.TryLock} {
				_, err := f(ctx, key)
				if !errors.Is(err, sqllock.ErrInvalidKey) || (key != "" && !strings.Contains(err.Error(), strconv.Quote(key)[:min(len(key), 10)])) {
					t.Errorf("key %q: %v, want ErrInvalidKey naming the key", key, err)
				}
			}
		}
		for _, n := range []int{0, -1, rwlock.MaxReaders + 1} {
			if _, err := rwlock.New(db.DB, db.Dialect, n); !errors.Is(err, sqllock.ErrInvalidOption) {
				t.Errorf("%d readers: %v, want ErrInvalidOption", n, err)
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := rw.Lock(cctx, locktest.Key(t)); !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled Lock: %v", err)
		}
	})
}

// TestWriterWaitsForReaders: a writer waits for the readers that hold the
// key when it takes the gate, and its token is larger than theirs; a
// TryLock beside a reader is refused.
func TestWriterWaitsForReaders(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rw := newRW(t, db)
		ctx := ctxT(t)
		key := locktest.Key(t)
		r1, err := rw.RLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := rw.RLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.TryLock(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("TryLock beside two readers: %v, want ErrNotAcquired", err)
		}
		got := make(chan *rwlock.Lease, 1)
		errs := make(chan error, 1)
		go func() {
			w, err := rw.Lock(ctx, key)
			if err != nil {
				errs <- err
				return
			}
			got <- w
		}()
		// Once the writer holds the gate, a new reader is refused.
		for {
			r, err := rw.TryRLock(ctx, key)
			if err != nil {
				if !errors.Is(err, sqllock.ErrNotAcquired) {
					t.Fatal(err)
				}
				break
			}
			_ = r.Release(ctx)
		}
		if err := r1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			t.Fatal("the writer got the key while a reader held it")
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		if err := r2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var w *rwlock.Lease
		select {
		case w = <-got:
		case err := <-errs:
			t.Fatal(err)
		}
		if w.Token() <= max(r1.Token(), r2.Token()) {
			t.Fatalf("writer's token %d not above the readers' %d, %d", w.Token(), r1.Token(), r2.Token())
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
