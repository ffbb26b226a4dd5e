package testdb

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
)

// Pause stops a child process (SIGSTOP), as a holder paused past its lease.
// On SQLite a process stopped inside a write transaction keeps the
// database's write lock, so every writer would wait for it whatever the
// lock table says: Pause resumes it for a moment and stops it again until
// it is stopped outside one.
func Pause(t testing.TB, db *DB, child *exec.Cmd) {
	t.Helper()
	for try := 0; ; try++ {
		if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if db.Dialect != sqllock.SQLite || writable(t, db) {
			return
		}
		if try == 100 {
			t.Fatal("the child was stopped inside a write transaction 100 times")
		}
		if err := child.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(1+try%5) * time.Millisecond)
	}
}

// writable reports whether a SQLite write transaction can begin at once.
func writable(t testing.TB, db *DB) bool {
	t.Helper()
	// SIGSTOP is delivered asynchronously: give it time to land.
	time.Sleep(20 * time.Millisecond)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var was int
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&was); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.Itoa(was))
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return false
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	return true
}

// Start starts a child process made by Child and waits for its line
// "HELD <n>", returning n and the lines that follow. The child is killed
// (after a SIGCONT, should it be paused) when the test ends.
func Start(t testing.TB, ctx context.Context, child *exec.Cmd) (int64, <-chan string) {
	t.Helper()
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Signal(syscall.SIGCONT); _ = child.Process.Kill(); _ = child.Wait() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // a chatty child is not waited for
			}
		}
	}()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the child ended before it said HELD")
			}
			if s, found := strings.CutPrefix(l, "HELD "); found {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("the child said %q", l)
				}
				return n, lines
			}
		case <-ctx.Done():
			t.Fatal("the child never said HELD")
		}
	}
}

// WaitLine waits for the line want among lines, until ctx ends.
func WaitLine(t testing.TB, ctx context.Context, lines <-chan string, want string) {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child ended without saying %q", want)
			}
			if l == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the child did not say %q", want)
		}
	}
}

// WaitStopped returns once the kernel reports every thread of pid as
// stopped (state T): /proc/<pid>/stat speaks for the main thread alone, and
// a Go program's other threads may run a moment longer.
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(stats) == 0 {
			t.Skipf("cannot read the state of process %d: %v", pid, err)
		}
		if allStopped(stats) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d did not stop", pid)
}

func allStopped(stats []string) bool {
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		// The state follows the parenthesised command name.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}
