package tablelock_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// killedWaiters is how many fair waiters the killed process has queued:
// more than 3 wait bounds' worth of claim windows (12 × 250ms = 3s).
const killedWaiters = 12

// TestFairKilledProcessOfManyWaiters: a process killed with many fair
// waiters queued for a key (one Locker, a waiter per goroutine, as the
// storm's) costs the live waiter queued behind them at most 3 wait
// bounds once the key is released, not a claim window per dead entry.
func TestFairKilledProcessOfManyWaiters(t *testing.T) {
	db, table, _ := fairTable(t)
	opts := []tablelock.Option{tablelock.WithTable(table), tablelock.WithTTL(boundTTL), tablelock.WithFairness(true)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newLocker(t, db, opts...)
	key := locktest.Key(t)
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	child := testdb.Child(t, "TestFairManyWaitersChild", envManyWaiters+"="+table+"/"+key+"/"+strconv.Itoa(killedWaiters))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	waitQueued(t, db, table, key, killedWaiters)
	waiter := newLocker(t, testdb.Fresh(t, sqllock.Postgres, 0), opts...)
	got := acquireAndRelease(ctx, waiter, key)
	waitQueued(t, db, table, key, killedWaiters+1)
	child.Process.Kill()
	child.Wait()
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	servedWithin(t, got, released, within, "the live waiter behind a killed process's "+strconv.Itoa(killedWaiters)+" waiters")
}

const envManyWaiters = "TABLELOCK_MANY_WAITERS_CHILD"

// TestFairManyWaitersChild queues n fair waiters of one Locker, and waits
// to be killed.
func TestFairManyWaitersChild(t *testing.T) {
	v := os.Getenv(envManyWaiters)
	if v == "" {
		t.Skip("the child of TestFairKilledProcessOfManyWaiters")
	}
	parts := strings.Split(v, "/")
	table, n := parts[0], parts[len(parts)-1]
	key := strings.Join(parts[1:len(parts)-1], "/")
	count, err := strconv.Atoi(n)
	if err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, testdb.Open(t, sqllock.Postgres), tablelock.WithTable(table), tablelock.WithTTL(boundTTL), tablelock.WithFairness(true))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range count {
		wg.Go(func() {
			if lease, err := l.Acquire(ctx, key); err == nil {
				lease.Release(context.Background())
			}
		})
	}
	wg.Wait()
}
