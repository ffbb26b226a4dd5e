package tablelock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

const envGateWaiter = "TABLELOCK_SQLITE_GATE_WAITER"

// farBound is a wait bound and a backoff cap far beyond the test: a
// waiter served soon after the release was woken by its gate.
const farBound = time.Minute

// A waiter in another process on SQLite takes the key within a few
// milliseconds of its release, where it would otherwise poll: its pauses
// had grown past a second, and its bound is a minute.
func TestSQLiteGateWakesWaiterInOtherProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no gates on Windows: waiters poll")
	}
	db := testdb.Fresh(t, sqllock.SQLite, 0)
	holder := newLocker(t, db)
	key := locktest.Key(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	child := testdb.Child(t, "TestSQLiteGateWaiterChild", envGateWaiter+"="+key)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	lines := make(chan string, 4)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	waitLine := func(prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the child ended before it said %q", prefix)
				}
				if v, ok := strings.CutPrefix(l, prefix); ok {
					return v
				}
			case <-ctx.Done():
				t.Fatalf("the child never said %q", prefix)
			}
		}
	}
	waitLine("waiting")
	// Long enough that a poller's pause has grown past a second.
	time.Sleep(3 * time.Second)
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	at, err := strconv.ParseInt(waitLine("acquired "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Unix(0, at).Sub(released)
	t.Logf("the waiter in the other process took the key %v after the release", took.Round(time.Microsecond))
	if took > 250*time.Millisecond {
		t.Errorf("the waiter in the other process took the key %v after the release; a gate wakes it within milliseconds", took.Round(time.Millisecond))
	}
}

// TestSQLiteGateWaiterChild acquires the key, with a wait bound and a
// backoff cap of a minute, and says when it got it.
func TestSQLiteGateWaiterChild(t *testing.T) {
	key := os.Getenv(envGateWaiter)
	if key == "" {
		t.Skip("the child of TestSQLiteGateWakesWaiterInOtherProcess")
	}
	l := newLocker(t, testdb.Open(t, sqllock.SQLite), tablelock.WithWaitBound(farBound), tablelock.WithMaxBackoff(farBound))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of the held key = %v", err)
	}
	fmt.Println("waiting")
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("acquired %d\n", time.Now().UnixNano())
	lease.Release(context.Background())
}
