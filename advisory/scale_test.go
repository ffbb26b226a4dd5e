package advisory_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// sampleInUse records the most connections db had in use until stop.
func sampleInUse(db *testdb.DB, stop <-chan struct{}) func() int {
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			peak.Store(max(peak.Load(), int64(db.Stats().InUse)))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() int { <-done; return int(peak.Load()) }
}

// TestThousandKeysTenConnections: 1,000 keys held at once by one Locker on
// a pool of 10 connections; the server shows them on at most two sessions.
func TestThousandKeysTenConnections(t *testing.T) {
	forEach(t, func(t *testing.T, shared *testdb.DB) {
		db := testdb.Fresh(t, shared.Dialect, 10)
		ctx := ctxT(t)
		l := newLocker(t, db)
		const n, workers = 1000, 20
		base := locktest.Key(t)
		stop := make(chan struct{})
		peak := sampleInUse(db, stop)
		leases := make([]sqllock.Lease, n)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					lease, err := l.Acquire(ctx, fmt.Sprintf("%s/%d", base, i))
					if err != nil {
						t.Error(err)
						return
					}
					leases[i] = lease
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		sessions := map[int64]int{}
		for i := 0; i < n; i += 1 {
			ids := holders(t, shared, fmt.Sprintf("%s/%d", base, i))
			if len(ids) != 1 {
				t.Fatalf("key %d: server shows holders %v", i, ids)
			}
			sessions[ids[0]]++
		}
		if len(sessions) > advisory.DefaultSessions {
			t.Errorf("%d keys spread over %d sessions, want at most %d", n, len(sessions), advisory.DefaultSessions)
		}
		for i := range n {
			if err := leases[i].Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		if p := peak(); p > advisory.DefaultSessions {
			t.Errorf("peak %d connections in use, want at most %d", p, advisory.DefaultSessions)
		}
		t.Logf("%d keys on sessions %v", n, sessions)
		waitIdle(t, db)
	})
}

// TestManyWaiters: 200 blocked waiters on a pool of 10 connections take no
// connection each beyond the Locker's wait sessions, and queue no more
// waits in the server than it has (none with WithWaitSessions(0)); all
// get their turn, and the cancelled ones leave nothing behind.
func TestManyWaiters(t *testing.T) {
	for _, waits := range []int{advisory.DefaultWaitSessions, 0} {
		t.Run(fmt.Sprintf("waits=%d", waits), func(t *testing.T) { manyWaiters(t, waits) })
	}
}

func manyWaiters(t *testing.T, waits int) {
	forEach(t, func(t *testing.T, shared *testdb.DB) {
		db := testdb.Fresh(t, shared.Dialect, 10)
		ctx := ctxT(t)
		holder, waiter := newLocker(t, db), newLocker(t, db, advisory.WithWaitSessions(waits))
		const keys, n = 10, 200
		base := locktest.Key(t)
		key := func(i int) string { return fmt.Sprintf("%s/%d", base, i%keys) }
		var held []sqllock.Lease
		for i := range keys {
			lease, err := holder.Acquire(ctx, key(i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, lease)
		}
		stop := make(chan struct{})
		peak := sampleInUse(db, stop)
		var got, gaveUp atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c := ctx
				if i%10 == 0 { // some give up while waiting
					var cancel context.CancelFunc
					c, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
					defer cancel()
				}
				lease, err := waiter.Acquire(c, key(i))
				if err != nil {
					if errors.Is(err, sqllock.ErrNotAcquired) && errors.Is(err, context.DeadlineExceeded) {
						gaveUp.Add(1)
						return
					}
					t.Error(err)
					return
				}
				got.Add(1)
				if err := lease.Release(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		time.Sleep(300 * time.Millisecond)
		var all []string
		for i := range keys {
			all = append(all, key(i))
		}
		// Each wait session holds one key's place in the server's queue.
		if q := queuedInServer(t, shared, all); q > waits {
			t.Errorf("%d waits queued in the server, want at most %d", q, waits)
		}
		if g := got.Load(); g != 0 {
			t.Fatalf("%d waiters acquired held keys", g)
		}
		for _, lease := range held {
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		close(stop)
		if got.Load()+gaveUp.Load() != n || gaveUp.Load() != n/10 {
			t.Errorf("%d acquired, %d gave up, of %d; want %d to give up", got.Load(), gaveUp.Load(), n, n/10)
		}
		most := 2 * advisory.DefaultSessions
		if waits > 0 {
			most += waits + 1 // and the statement that interrupts a cancelled wait
		}
		if p := peak(); p > most {
			t.Errorf("peak %d connections in use for 200 waiters, want at most %d", p, most)
		}
		waitIdle(t, db)
	})
}

// queuedInServer counts lock waits for keys in the server: ungranted
// advisory locks on PostgreSQL, sessions waiting in GET_LOCK on MariaDB.
func queuedInServer(t testing.TB, db *testdb.DB, keys []string) int {
	t.Helper()
	total := 0
	for _, key := range keys {
		var n int
		var err error
		if db.Dialect.IsMySQL() {
			name := hex.EncodeToString([]byte(mysqlName(db, key)))
			err = db.QueryRow(`SELECT count(*) FROM information_schema.PROCESSLIST
WHERE STATE = 'User lock' AND LOWER(INFO) LIKE CONCAT('%', ?, '%')`, name).Scan(&n)
		} else {
			id := advisory.PostgresKey(advisory.DefaultNamespace, key)
			err = db.QueryRow(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
AND classid::bigint = $1 AND objid::bigint = $2 AND NOT granted`, int64(uint64(id)>>32), int64(uint32(id))).Scan(&n)
		}
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// TestKillHolderProcess: SIGKILL of a process holding a key; the server
// ends its session and another process acquires at once.
func TestKillHolderProcess(t *testing.T) {
	if key := os.Getenv("ADVISORY_CHILD_KEY"); key != "" {
		d, err := sqllock.ParseDialect(os.Getenv("ADVISORY_CHILD_DIALECT"))
		if err != nil {
			t.Fatal(err)
		}
		db := testdb.Open(t, d)
		l, err := advisory.New(db.DB, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		fmt.Println("HELD")
		time.Sleep(time.Minute) // killed long before
		return
	}
	forEach(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		cmd := testdb.Child(t, "TestKillHolderProcess", "ADVISORY_CHILD_KEY="+key, "ADVISORY_CHILD_DIALECT="+db.Dialect.String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		held := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "HELD" {
					held <- true
					break
				}
			}
			for sc.Scan() {
			}
			close(held)
		}()
		select {
		case ok := <-held:
			if !ok {
				t.Fatal("child exited without holding the key")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("child did not hold the key within 30s")
		}
		l := newLocker(t, db)
		if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
			t.Fatalf("key held by the child was granted here: %v", err)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		lease, err := l.Acquire(wctx, key)
		if err != nil {
			t.Fatalf("key not free within 10s of SIGKILL: %v", err)
		}
		t.Logf("acquired %v after SIGKILL", time.Since(start))
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
