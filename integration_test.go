package sqllock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
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
	"github.com/sqllock/sqllock/tablelock"
)

// Child processes run TestChild with their role in these variables.
const (
	envRole    = "SQLLOCK_CHILD_ROLE"
	envDialect = "SQLLOCK_CHILD_DIALECT"
	envKey     = "SQLLOCK_CHILD_KEY"
	envTable   = "SQLLOCK_CHILD_TABLE"
	envRounds  = "SQLLOCK_CHILD_ROUNDS"
	envTTL     = "SQLLOCK_CHILD_TTL"
	envFair    = "SQLLOCK_CHILD_FAIR" // "1": tablelock.WithFairness
)

// lockerOpts are the options of the Lockers of a test: fair order or not.
func lockerOpts(ttl time.Duration, fair bool) []tablelock.Option {
	return []tablelock.Option{tablelock.WithTTL(ttl), tablelock.WithFairness(fair)}
}

// TestChild is the body of the child processes; it does nothing in a normal run.
func TestChild(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("only runs as a child process of the integration tests")
	}
	d, err := sqllock.ParseDialect(os.Getenv(envDialect))
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.Open(t, d)
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	l, err := tablelock.New(db.DB, d, lockerOpts(ttl, os.Getenv(envFair) == "1")...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	key := os.Getenv(envKey)
	switch role {
	case "counter":
		rounds, _ := strconv.Atoi(os.Getenv(envRounds))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range rounds {
					if err := incrementUnderLock(ctx, l, db, key, os.Getenv(envTable)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	case "holder":
		// Take the key, say so, and keep it until killed.
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("HELD %d\n", lease.Token())
		time.Sleep(time.Hour)
	case "pausable":
		// Take the key and work in small steps, each only while Err() is
		// nil; report the loss when it comes.
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("HELD %d\n", lease.Token())
		for step := 0; ; step++ {
			// The stamp is taken before the check: a pause between a check
			// and the work it allowed cannot be seen by any lock (fencing is
			// for that), but a check begun after the pause must fail.
			checked := time.Now().UnixMicro()
			if err := lease.Err(); err != nil {
				fmt.Printf("LOST %v\n", errors.Is(err, sqllock.ErrLockLost))
				return
			}
			fmt.Printf("WORK %d %d\n", step, checked)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// incrementUnderLock is the critical section: read the counter, pause,
// write it back. Two holders at once lose an increment.
func incrementUnderLock(ctx context.Context, l sqllock.Locker, db *testdb.DB, key, table string) error {
	return sqllock.Do(ctx, l, key, func(ctx context.Context) error {
		ph := "?"
		if db.Dialect == sqllock.Postgres {
			ph = "$1"
		}
		var v int
		if err := db.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil {
			return err
		}
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		_, err := db.ExecContext(ctx, "UPDATE "+table+" SET v = "+ph+" WHERE id = 1", v+1)
		return err
	})
}

func counterTable(t *testing.T, db *testdb.DB) string {
	t.Helper()
	name := fmt.Sprintf("it_counter_%d", rand.Uint32())
	if _, err := db.Exec("CREATE TABLE " + name + " (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + name) })
	if _, err := db.Exec("INSERT INTO " + name + " (id, v) VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	return name
}

// Many goroutines in three OS processes (two children and this one)
// contend for one key; the counter they increment under it is exact.
func TestMultiProcessMutualExclusion(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) { multiProcessMutex(t, db, false) })
}

// The same with fair order (PostgreSQL), where a release grants the key
// to the waiter queued first.
func TestMultiProcessMutualExclusionFair(t *testing.T) {
	multiProcessMutex(t, testdb.Open(t, sqllock.Postgres), true)
}

func multiProcessMutex(t *testing.T, db *testdb.DB, fair bool) {
	table := counterTable(t, db)
	key := locktest.Key(t)
	const rounds = 15 // per goroutine; 4 goroutines per process
	var children []*exec.Cmd
	var outs []*strings.Builder
	for range 2 {
		cmd := testdb.Child(t, "TestChild", envRole+"=counter", envDialect+"="+db.Dialect.String(),
			envKey+"="+key, envTable+"="+table, envRounds+"="+strconv.Itoa(rounds), envFair+"="+fairEnv(fair))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children = append(children, cmd)
		outs = append(outs, out)
	}
	l, err := tablelock.New(db.DB, db.Dialect, lockerOpts(5*time.Second, fair)...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	var stopped atomic.Int64 // rounds not run: their goroutine failed
	for range 4 {
		wg.Go(func() {
			for i := range rounds {
				if err := incrementUnderLock(ctx, l, db, key, table); err != nil {
					t.Error(err)
					stopped.Add(int64(rounds - i))
					return
				}
			}
		})
	}
	wg.Wait()
	for i, c := range children {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	var v int
	if err := db.QueryRow("SELECT v FROM " + table + " WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	want := 3 * 4 * rounds
	switch n := int(stopped.Load()); {
	case n > 0 && v != want-n:
		t.Fatalf("counter = %d, want %d (%d rounds in this process stopped on the errors above): two holders overlapped", v, want-n, n)
	case n > 0:
		t.Fatalf("counter = %d: %d rounds in this process stopped on the errors above; no overlap", v, n)
	case v != want:
		t.Fatalf("counter = %d, want %d: two holders overlapped", v, want)
	}
}

// fairEnv is the child's envFair for fair.
func fairEnv(fair bool) string {
	if fair {
		return "1"
	}
	return "0"
}

// startHolder starts a child in role and waits for its HELD line.
func startHolder(t *testing.T, db *testdb.DB, role, key string, ttl time.Duration, fair ...bool) (*exec.Cmd, int64, *bufio.Scanner) {
	t.Helper()
	cmd := testdb.Child(t, "TestChild", envRole+"="+role, envDialect+"="+db.Dialect.String(), envKey+"="+key, envTTL+"="+ttl.String(),
		envFair+"="+fairEnv(len(fair) > 0 && fair[0]))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if tok, ok := strings.CutPrefix(sc.Text(), "HELD "); ok {
			n, _ := strconv.ParseInt(tok, 10, 64)
			return cmd, n, sc
		}
	}
	t.Fatalf("child never reported holding the key: %v", sc.Err())
	return nil, 0, nil
}

// A holder killed with SIGKILL never releases; its key comes back within
// TTL plus one renewal interval, with a larger token.
func TestCrashedHolderKeyComesBack(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) { crashedHolder(t, db, false) })
}

// The same with fair order (PostgreSQL): an expired row is granted to
// nobody; the next take has it.
func TestCrashedHolderKeyComesBackFair(t *testing.T) {
	crashedHolder(t, testdb.Open(t, sqllock.Postgres), true)
}

func crashedHolder(t *testing.T, db *testdb.DB, fair bool) {
	const ttl = 2 * time.Second
	key := locktest.Key(t)
	cmd, token, _ := startHolder(t, db, "holder", key, ttl, fair)
	l, err := tablelock.New(db.DB, db.Dialect, lockerOpts(ttl, fair)...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.TryAcquire(ctx, key); !errors.Is(err, sqllock.ErrNotAcquired) {
		t.Fatalf("TryAcquire while the child holds the key = %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	waited := time.Since(killed)
	t.Logf("key came back %v after SIGKILL (TTL %v)", waited, ttl)
	// The row expires at most TTL after the holder's last renewal, which
	// was at most one renewal interval before the kill; 2s of slack for
	// a loaded machine.
	if limit := ttl + ttl/3 + 2*time.Second; waited > limit {
		t.Errorf("key came back after %v, want within %v", waited, limit)
	}
	if lease.Token() <= token {
		t.Errorf("token %d after the crash not above the dead holder's %d", lease.Token(), token)
	}
}

// A fair waiter killed with SIGKILL while queued (PostgreSQL): the
// release grants the key to its entry, which holds it for the claim
// window only (nobody claims it), not the dead waiter's TTL; then the key
// comes back, with a larger token.
func TestCrashedWaiterKeyComesBackFair(t *testing.T) {
	db := testdb.Open(t, sqllock.Postgres)
	const ttl = 8 * time.Second // far above the claim window and the bound
	key := locktest.Key(t)
	l, err := tablelock.New(db.DB, db.Dialect, lockerOpts(ttl, true)...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The child's Acquire blocks: it queues, and would say HELD once served.
	cmd := testdb.Child(t, "TestChild", envRole+"=holder", envDialect+"="+db.Dialect.String(), envKey+"="+key, envTTL+"="+ttl.String(), envFair+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := db.QueryRow("SELECT cardinality(waiters) FROM sqllock_locks WHERE lock_key = $1", key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter process never queued")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	released := time.Now()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var granted int64
	// The release left an owner only where it granted the key.
	if err := db.QueryRow("SELECT token FROM sqllock_locks WHERE lock_key = $1 AND owner <> ''", key).Scan(&granted); err != nil {
		t.Fatalf("the release did not grant the key to the dead waiter: %v", err)
	}
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	waited := time.Since(released)
	t.Logf("key came back %v after the release granted it to a dead waiter (TTL %v, claim window %v)", waited, ttl, tablelock.DefaultClaimWindow)
	if limit := tablelock.DefaultClaimWindow + tablelock.DefaultWaitBound + time.Second; waited > limit {
		t.Errorf("key came back after %v, want within the claim window, the wait bound and 1s of slack (%v), not the dead waiter's TTL", waited, limit)
	}
	if granted <= first.Token() || lease.Token() <= granted {
		t.Errorf("tokens %d, then %d granted to the dead waiter, then %d: want them rising", first.Token(), granted, lease.Token())
	}
}

// A holder paused (SIGSTOP) past its lease: another process takes the key
// with a larger token; when the holder resumes, the first thing it learns
// is that its lease is lost, and it does no further work under it.
func TestPausedHolderLearnsOfLossOnResume(t *testing.T) {
	testdb.ForEach(t, func(t *testing.T, db *testdb.DB) {
		const ttl = time.Second
		key := locktest.Key(t)
		cmd, token, sc := startHolder(t, db, "pausable", key, ttl)
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// The signal is only queued when kill returns: the child may run on
		// another core a moment longer, so wait until the kernel says stopped.
		testdb.WaitStopped(t, cmd.Process.Pid)
		stopped := time.Now()
		l, err := tablelock.New(db.DB, db.Dialect, tablelock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Token() <= token {
			t.Errorf("new holder's token %d not above the paused holder's %d", lease.Token(), token)
		}
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasPrefix(sc.Text(), "LOST") {
				break
			}
		}
		if len(lines) == 0 || lines[len(lines)-1] != "LOST true" {
			t.Fatalf("paused holder did not report ErrLockLost; its output: %q", lines)
		}
		// No check begun after the pause began may have passed: such a step
		// would have run while the new holder held the key.
		for _, line := range lines {
			var step, at int64
			if n, _ := fmt.Sscanf(line, "WORK %d %d", &step, &at); n == 2 && time.UnixMicro(at).After(stopped) {
				t.Errorf("paused holder worked after its lease was gone: %q", line)
			}
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
