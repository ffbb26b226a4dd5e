package rowlock_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// childEnv reads the parameters a parent passed to a child test, or skips
// the test when it is not running as a child.
func childEnv(t *testing.T, role string) (*testdb.DB, string) {
	if os.Getenv("ROWLOCK_CHILD") != role {
		t.Skip("runs only as a child process of another test")
	}
	d, err := sqllock.ParseDialect(os.Getenv("ROWLOCK_DIALECT"))
	if err != nil {
		t.Fatal(err)
	}
	return testdb.Open(t, d), os.Getenv("ROWLOCK_KEY")
}

// TestChildCounter is a child of TestMutexAcrossProcesses: it increments
// the counter file under the lock, with a read–pause–write that loses an
// increment whenever two holders overlap.
func TestChildCounter(t *testing.T) {
	db, key := childEnv(t, "counter")
	path := os.Getenv("ROWLOCK_FILE")
	rounds, _ := strconv.Atoi(os.Getenv("ROWLOCK_ROUNDS"))
	l := newLocker(t, db)
	ctx := ctxT(t)
	for range rounds {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		if err := os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMutexAcrossProcesses(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		const procs, rounds = 3, 25
		path := filepath.Join(t.TempDir(), "counter")
		if err := os.WriteFile(path, []byte("0"), 0o600); err != nil {
			t.Fatal(err)
		}
		key := locktest.Key(t)
		errs := make(chan error, procs)
		for range procs {
			cmd := testdb.Child(t, "TestChildCounter", "ROWLOCK_CHILD=counter", "ROWLOCK_DIALECT="+db.Dialect.String(),
				"ROWLOCK_KEY="+key, "ROWLOCK_FILE="+path, "ROWLOCK_ROUNDS="+strconv.Itoa(rounds))
			go func() {
				out, err := cmd.CombinedOutput()
				if err != nil {
					err = fmt.Errorf("%v:\n%s", err, out)
				}
				errs <- err
			}()
		}
		for range procs {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(procs*rounds) {
			t.Fatalf("counter = %s, want %d: two processes held the key at once", got, procs*rounds)
		}
	})
}

// TestChildHold is a child of TestKilledHolder: it takes the key, says so,
// and holds it until killed.
func TestChildHold(t *testing.T) {
	db, key := childEnv(t, "hold")
	lease, err := newLocker(t, db).Acquire(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("HELD %d\n", lease.Token())
	time.Sleep(time.Minute)
}

// TestKilledHolder: SIGKILL of a holder process hands the key to a waiter
// in another process at once, because the database ends the dead session's
// transaction when its socket closes (no expiry to wait out).
func TestKilledHolder(t *testing.T) {
	forEachServer(t, func(t *testing.T, db *testdb.DB) {
		ctx, key := ctxT(t), locktest.Key(t)
		cmd := testdb.Child(t, "TestChildHold", "ROWLOCK_CHILD=hold", "ROWLOCK_DIALECT="+db.Dialect.String(), "ROWLOCK_KEY="+key)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		var childToken int64
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, err := fmt.Sscanf(sc.Text(), "HELD %d", &childToken); err == nil {
				break
			}
		}
		if childToken == 0 {
			t.Fatal("child never reported holding the key")
		}
		go func() { // drain the child's output
			for sc.Scan() {
			}
		}()
		l := newLocker(t, db)
		if _, err := l.TryAcquire(ctx, key); err == nil {
			t.Fatal("TryAcquire succeeded while the child holds the key")
		}
		got := make(chan sqllock.Lease, 1)
		go func() {
			lease, err := l.Acquire(ctx, key)
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		time.Sleep(100 * time.Millisecond) // let the waiter queue
		killed := time.Now()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case lease := <-got:
			if lease == nil {
				return
			}
			took := time.Since(killed)
			t.Logf("%v: key handed over %v after SIGKILL of the holder", db.Dialect, took)
			if lease.Token() <= childToken {
				t.Errorf("token %d not above the killed holder's %d", lease.Token(), childToken)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiter did not get the key within 10s of the holder's SIGKILL")
		}
	})
}
