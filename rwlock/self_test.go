package rwlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/rwlock"
	"github.com/sqllock/sqllock/tablelock"
)

// TestReadThenWrite: a goroutine that holds a read of a key without an
// owner and asks to write it would wait for itself until its context
// ends. It is refused at once instead, with an error that names the key
// and says why; so is a write followed by a read or a write. Another
// goroutine's write, on the same context, still waits for the read and
// gets the key once it is released.
func TestReadThenWrite(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rw := newRW(t, db)
		ctx := ctxT(t)
		key := locktest.Key(t)
		r, err := rw.RLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// A deadline far beyond what a refusal takes: the write must
		// return with it still running.
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w, err := rw.Lock(lctx, key)
		if err == nil {
			w.Release(ctx)
		}
		if lctx.Err() != nil {
			t.Fatalf("Lock after this goroutine's RLock waited until its deadline: %v", err)
		}
		if !errors.Is(err, sqllock.ErrInvalidOption) || !strings.Contains(err.Error(), strconv.Quote(key)) ||
			!strings.Contains(err.Error(), "this goroutine's context holds a read lock on this key") {
			t.Fatalf("Lock after this goroutine's RLock: %v, want ErrInvalidOption naming the key and the read", err)
		}
		noInternals(t, err)
		t.Logf("Lock after this goroutine's RLock: %v", err)

		// Another goroutine may wait for the read: it is not refused.
		got := make(chan error, 1)
		go func() {
			w, err := rw.Lock(ctx, key)
			if err == nil {
				err = w.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(100 * time.Millisecond) // let it start waiting
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("another goroutine's Lock, once the read was released: %v", err)
		}

		w, err = rw.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for name, f := range map[string]func(context.Context, string) (*rwlock.Lease, error){"RLock": rw.RLock, "Lock": rw.Lock} {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := f(lctx, key)
			if err == nil {
				l.Release(ctx)
			}
			if lctx.Err() != nil || !errors.Is(err, sqllock.ErrInvalidOption) ||
				!strings.Contains(err.Error(), "this goroutine's context holds the write lock on this key") {
				t.Errorf("%s after this goroutine's Lock: %v, want a refusal at once", name, err)
			}
			cancel()
		}
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Released, the key is this goroutine's to take again.
		w, err = rw.Lock(ctx, key)
		if err != nil {
			t.Fatalf("Lock after the Release of this goroutine's hold: %v", err)
		}
		_ = w.Release(ctx)
	})
}

// noInternals fails the test if err's text shows a lock row's key (the
// unit separator and its suffix) or the package underneath.
func noInternals(t testing.TB, err error) {
	t.Helper()
	for _, bad := range []string{"\x1f", `\x1f`, "rw:", "tablelock"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("error shows %q: %v", bad, err)
		}
	}
}

// TestErrorsNameTheKey: every error rwlock returns names the caller's
// key, never the lock rows' keys or the package they are held through:
// waits that end at the deadline behind a reader or a writer, refusals,
// a loss seen by Err, Release and Extend, and calls after Close.
func TestErrorsNameTheKey(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		rw := newRW(t, db)
		other := newRW(t, db)
		one, err := rwlock.New(db.DB, db.Dialect, 1, tablelock.WithTTL(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		ctx := ctxT(t)
		key := locktest.Key(t)
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				t.Errorf("%s: no error", what)
				return
			}
			if !strings.Contains(err.Error(), strconv.Quote(key)) {
				t.Errorf("%s: %v does not name the key", what, err)
			}
			noInternals(t, err)
			t.Logf("%s: %v", what, err)
		}
		short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 300*time.Millisecond) }

		r, err := rw.RLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.TryLock(ctx, key)
		check("TryLock beside a reader", err)
		sctx, cancel := short()
		_, err = other.Lock(sctx, key)
		cancel()
		if !errors.Is(err, sqllock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock behind a reader until the deadline: %v, want ErrNotAcquired and DeadlineExceeded", err)
		}
		check("Lock behind a reader until the deadline", err)
		_ = r.Release(ctx)

		w, err := rw.Lock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.TryRLock(ctx, key)
		check("TryRLock beside a writer", err)
		sctx, cancel = short()
		_, err = other.RLock(sctx, key)
		cancel()
		check("RLock behind a writer until the deadline", err)
		sctx, cancel = short()
		_, err = other.Lock(sctx, key)
		cancel()
		check("Lock behind a writer until the deadline", err)
		expire(t, db, key)
		check("Extend of a lost hold", w.Extend(ctx, time.Minute))
		check("Err of a lost hold", w.Err())
		check("Release of a lost hold", w.Release(ctx))
		check("second Release", w.Release(ctx))

		r, err = one.RLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = one.TryRLock(sqllock.WithOwner(ctx, "another"), key)
		check("TryRLock with every reader row held", err)
		check("Extend by a bad duration", r.Extend(ctx, 0))
		_ = r.Release(ctx)

		closed, err := rwlock.New(db.DB, db.Dialect, 2)
		if err != nil {
			t.Fatal(err)
		}
		closed.Close()
		for name, f := range map[string]func(context.Context, string) (*rwlock.Lease, error){
			"RLock": closed.RLock, "Lock": closed.Lock, "TryRLock": closed.TryRLock, "TryLock": closed.TryLock} {
			_, err := f(ctx, key)
			check(name+" after Close", err)
		}
	})
}
