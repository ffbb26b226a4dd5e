package rowlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

func rwKey(name string) string {
	return "rw/" + name + "/" + strconv.FormatUint(rand.Uint64(), 36)
}

// Shared leases overlap; a writer is refused while one is held, and waits
// for all of them; its token is larger than every reader's before it.
func TestSharedOverlapAndExclude(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		l := newLocker(t, db)
		ctx := ctxT(t)
		key := rwKey("overlap") // a missing row: the first reader creates it
		r1, err := l.AcquireShared(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := l.TryAcquireShared(ctx, key)
		if err != nil {
			t.Fatalf("a second reader was refused while only a reader holds %q: %v", key, err)
		}
		if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("a writer's TryAcquire beside two readers: %v, want ErrNotAcquired", err)
		}
		var wrote atomic.Bool
		w := make(chan sqllock.Lease, 1)
		go func() {
			lw, err := l.Acquire(ctx, key)
			if err != nil {
				t.Error(err)
				close(w)
				return
			}
			wrote.Store(true)
			w <- lw
		}()
		time.Sleep(200 * time.Millisecond)
		if wrote.Load() {
			t.Fatal("the writer got the key while readers held it")
		}
		tokens := []int64{r1.Token(), r2.Token()}
		if err := r1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if wrote.Load() {
			t.Fatal("the writer got the key while one reader held it")
		}
		if err := r2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lw, ok := <-w
		if !ok {
			return
		}
		for _, tok := range tokens {
			if lw.Token() <= tok {
				t.Errorf("writer's token %d is not larger than a reader's %d before it", lw.Token(), tok)
			}
		}
		if _, err := l.TryAcquireShared(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Errorf("a reader's TryAcquireShared beside a writer: %v, want ErrNotAcquired", err)
		}
		if err := lw.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Many readers and writers on one key: a probe sees readers overlap
// (concurrency above 1) and never a writer beside anyone; every writer's
// token is larger than every reader's that ended before it began.
func TestSharedContention(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		l := newLocker(t, db)
		ctx := ctxT(t)
		key := rwKey("contend")
		var readers, writers, maxReaders atomic.Int64
		var bad atomic.Int64
		var mu sync.Mutex
		var maxReadToken int64 // largest token of a released reader
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 6 {
					if (g+i)%4 == 0 { // a writer
						mu.Lock()
						before := maxReadToken
						mu.Unlock()
						lw, err := l.Acquire(ctx, key)
						if err != nil {
							t.Error(err)
							return
						}
						if writers.Add(1) != 1 || readers.Load() != 0 {
							bad.Add(1)
						}
						if lw.Token() <= before {
							t.Errorf("writer token %d <= earlier reader's %d", lw.Token(), before)
						}
						time.Sleep(5 * time.Millisecond)
						writers.Add(-1)
						if err := lw.Release(ctx); err != nil {
							t.Error(err)
						}
						continue
					}
					lr, err := l.AcquireShared(ctx, key)
					if err != nil {
						t.Error(err)
						return
					}
					n := readers.Add(1)
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
					if writers.Load() != 0 {
						bad.Add(1)
					}
					time.Sleep(30 * time.Millisecond)
					readers.Add(-1)
					mu.Lock()
					maxReadToken = max(maxReadToken, lr.Token())
					mu.Unlock()
					if err := lr.Release(ctx); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("most readers at once: %d", maxReaders.Load())
		if bad.Load() != 0 {
			t.Fatalf("%d times a writer held beside another holder", bad.Load())
		}
		if maxReaders.Load() < 2 {
			t.Fatalf("readers never overlapped (at most %d at once)", maxReaders.Load())
		}
	})
}

// A cancelled shared wait ends without the key, and leaves it free.
func TestSharedCancel(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		l := newLocker(t, db)
		ctx := ctxT(t)
		key := rwKey("cancel")
		lw, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := l.AcquireShared(cctx, key); !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a shared wait past its deadline: %v", err)
		}
		if err := lw.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lr, err := l.TryAcquireShared(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lr.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AcquireShared(ctx, ""); !errors.Is(err, sqllock.ErrInvalidKey) {
			t.Errorf("empty key: %v, want ErrInvalidKey", err)
		}
	})
}

// The MySQL path (MySQL 8 and MariaDB alike) has a blocking shared read
// but no NOWAIT one both parse: TryAcquireShared says so.
func TestSharedCommonPath(t *testing.T) {
	db := testdb.Open(t, sqllock.MySQL)
	l := newLocker(t, db)
	ctx := ctxT(t)
	key := rwKey("common")
	r1, err := l.AcquireShared(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.AcquireShared(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquireShared(ctx, key); !errors.Is(err, sqllock.ErrUnsupported) {
		t.Errorf("TryAcquireShared on the MySQL path: %v, want ErrUnsupported", err)
	}
	if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
		t.Errorf("TryAcquire beside readers: %v, want ErrNotAcquired", err)
	}
	if r2.Token() <= r1.Token() {
		t.Errorf("tokens %d then %d", r1.Token(), r2.Token())
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
}
