//go:build unix

package locktable_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// gateWait is a wait on a gate far longer than any wake-up may take: a
// waiter back within wakeWithin was woken by the gate, not by its bound.
const (
	gateWait   = 20 * time.Second
	wakeWithin = 500 * time.Millisecond
)

// sqliteGate opens a SQLite lock table of the test's own and its Gate.
func sqliteGate(t *testing.T, table string) *locktable.Gate {
	t.Helper()
	db := testdb.Open(t, sqllock.SQLite)
	tbl := opener(t, db, locktable.Config{Table: table, Notify: true})()
	g := tbl.Gate(nil)
	if g == nil {
		t.Fatal("no gate on SQLite")
	}
	t.Cleanup(g.Close)
	return g
}

// A holder's gate whose folder could not be found when it armed (the
// pool too busy to answer within the gate's bound) is kept once the pool
// answers, without another Arm: its waiters are not left polling.
func TestSQLiteGateFolderFoundLate(t *testing.T) {
	db := testdb.Fresh(t, sqllock.SQLite, 1)
	table := newTable(t, db)
	tbl := opener(t, db, locktable.Config{Table: table, Notify: true})()
	g := tbl.Gate(nil)
	if g == nil {
		t.Fatal("no gate on SQLite")
	}
	t.Cleanup(g.Close)
	ctx := context.Background()
	busy, err := db.Conn(ctx) // the pool's one connection
	if err != nil {
		t.Fatal(err)
	}
	g.Arm("k")
	defer g.Disarm("k")
	time.Sleep(1500 * time.Millisecond) // past the first look's bound
	busy.Close()
	for deadline := time.Now().Add(5 * time.Second); !g.Kept("k"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gate was never kept after the pool answered")
		}
	}
}

// A SQLite gate wakes its waiter when the holder lets go, and a waiter on
// a key nobody keeps is told so at once (errNoGate: it polls); the pipe
// is gone from the folder after the holder let go.
func TestSQLiteGateWakesOnDisarm(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	table := newTable(t, db)
	holder, waiter := sqliteGate(t, table), sqliteGate(t, table)
	ctx := context.Background()
	if got, err := waiter.Wait(ctx, "k", gateWait); got || err == nil {
		t.Fatalf("wait on a gate nobody keeps = %v, %v; want false and an error (poll)", got, err)
	}
	armKept(t, holder, "k")
	done := make(chan error, 1)
	go func() {
		got, err := waiter.Wait(ctx, "k", gateWait)
		if err == nil && !got {
			err = context.DeadlineExceeded
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the waiter passed a kept gate: %v", err)
	default:
	}
	let := time.Now()
	holder.Disarm("k")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(let); d > wakeWithin {
		t.Errorf("woken %v after the holder let go, want within %v", d, wakeWithin)
	}
	dir := locktable.GateDir(testdb.SQLitePath(db.DSN))
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("gate folder %s keeps %d files after the holder let go", filepath.Base(dir), len(left))
	}

	// A waiter that gives up returns at once.
	armKept(t, holder, "k")
	defer holder.Disarm("k")
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := waiter.Wait(cctx, "k", gateWait); err != context.DeadlineExceeded {
		t.Errorf("cancelled wait = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > wakeWithin {
		t.Errorf("cancelled wait returned after %v", d)
	}
}

const envGateChild = "LOCKTABLE_GATE_CHILD"

// A holder killed with SIGKILL wakes the waiters on its gate: the kernel
// closes its pipe.
func TestSQLiteGateWakesOnKill(t *testing.T) {
	db := testdb.Open(t, sqllock.SQLite)
	table := newTable(t, db)
	waiter := sqliteGate(t, table)
	child := testdb.Child(t, "TestSQLiteGateChild", envGateChild+"="+table)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	armed := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.Contains(s.Text(), "armed") {
				armed <- true
			}
		}
		close(armed)
	}()
	select {
	case ok := <-armed:
		if !ok {
			t.Fatal("the child ended before it armed its gate")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not arm its gate")
	}
	done := make(chan error, 1)
	go func() {
		got, err := waiter.Wait(context.Background(), "k", gateWait)
		if err == nil && !got {
			err = context.DeadlineExceeded
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the waiter passed the child's gate: %v", err)
	default:
	}
	killed := time.Now()
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(killed); d > wakeWithin {
		t.Errorf("woken %v after the holder was killed, want within %v", d, wakeWithin)
	}
}

// TestSQLiteGateChild keeps the gate of key "k" and waits to be killed.
func TestSQLiteGateChild(t *testing.T) {
	table := os.Getenv(envGateChild)
	if table == "" {
		t.Skip("the child of TestSQLiteGateWakesOnKill")
	}
	armKept(t, sqliteGate(t, table), "k")
	os.Stdout.WriteString("armed\n")
	time.Sleep(40 * time.Second)
}

// armKept arms key's gate and waits until it keeps its pipe: a Gate's
// first Arm finds the gate folder in the background, and keeps the pipe
// once it has.
func armKept(t *testing.T, g *locktable.Gate, key string) {
	t.Helper()
	g.Arm(key)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if g.Kept(key) {
			return
		}
	}
	t.Fatal("the gate never kept its pipe")
}
