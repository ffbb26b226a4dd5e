package e2e_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// Environment of TestCommonKillChild.
const (
	envRacerKey = "SQLLOCK_TEST_RACER_KEY"
	envRacerLog = "SQLLOCK_TEST_RACER_LOG"
)

// racerTTL is the lease the racers take: short, so a killed or paused
// holder's key comes back within the test.
const racerTTL = 800 * time.Millisecond

// On the MySQL path, 16 goroutines in 2 processes race for one key while
// holders are killed (SIGKILL) and paused past their lease (SIGSTOP): the
// tokens of the writes the fence accepts strictly increase in the order
// they commit, and a paused holder's write after its resume is refused.
func TestCommonPathTokensUnderKills(t *testing.T) {
	db := testdb.Open(t, sqllock.MySQL)
	key := locktest.Key(t)
	logTable := fmt.Sprintf("racer_log_%d", time.Now().UnixNano())
	if _, err := db.Exec("CREATE TABLE " + logTable + " (seq bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, token bigint NOT NULL, pid int NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + logTable) })

	var (
		mu     sync.Mutex
		stale  []string
		held   = make(chan int, 1024) // pids that reported a hold
		kills  int
		pauses int
	)
	start := func() *exec.Cmd {
		cmd := testdb.Child(t, "TestCommonKillChild", envRacerKey+"="+key, envRacerLog+"="+logTable)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func(pid int, out io.Reader) {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				switch line := sc.Text(); {
				case strings.HasPrefix(line, "HELD "):
					select {
					case held <- pid:
					default:
					}
				case strings.HasPrefix(line, "STALE "):
					mu.Lock()
					stale = append(stale, line)
					mu.Unlock()
				}
			}
		}(cmd.Process.Pid, out)
		return cmd
	}
	procs := []*exec.Cmd{start(), start()}
	t.Cleanup(func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	})
	deadline := time.Now().Add(12 * time.Second)
	for round := 0; time.Now().Before(deadline); round++ {
		var pid int
		select {
		case pid = <-held:
		case <-time.After(10 * time.Second):
			t.Fatal("no racer reported a hold for 10s")
		}
		i := 0
		if procs[1].Process.Pid == pid {
			i = 1
		}
		if procs[i].Process.Pid != pid {
			continue // a process already killed
		}
		if round%2 == 0 {
			// Kill the holder: its key comes back after the TTL.
			procs[i].Process.Signal(syscall.SIGKILL)
			procs[i].Wait()
			procs[i] = start()
			kills++
		} else {
			// Pause the holder past its lease; the other process takes
			// the key meanwhile; its writes after the resume are stale.
			procs[i].Process.Signal(syscall.SIGSTOP)
			time.Sleep(3 * racerTTL)
			procs[i].Process.Signal(syscall.SIGCONT)
			pauses++
		}
		for len(held) > 0 { // only holds reported after this round
			<-held
		}
	}
	time.Sleep(2 * racerTTL) // the last resumed holders write, or are refused

	rows, err := db.Query("SELECT token, pid FROM " + logTable + " ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last int64
	n := 0
	for rows.Next() {
		var tok int64
		var pid int
		if err := rows.Scan(&tok, &pid); err != nil {
			t.Fatal(err)
		}
		if tok <= last {
			t.Errorf("write %d: token %d (pid %d) accepted after token %d", n, tok, pid, last)
		}
		last = tok
		n++
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d fenced writes accepted, %d kills, %d pauses, %d stale writes refused", n, kills, pauses, len(stale))
	if n < 10 || kills == 0 || pauses == 0 {
		t.Errorf("too little happened to show anything: %d writes, %d kills, %d pauses", n, kills, pauses)
	}
	if len(stale) == 0 {
		t.Error("no paused holder's write was refused")
	}
}

// TestCommonKillChild is one racing process of
// TestCommonPathTokensUnderKills: 8 goroutines take the key on the MySQL
// path, report the hold, then write through the fence, whatever their
// lease says by then (a holder that does not know it was paused), and
// report a refused write.
func TestCommonKillChild(t *testing.T) {
	key := os.Getenv(envRacerKey)
	if key == "" {
		t.Skip("run by TestCommonPathTokensUnderKills")
	}
	logTable := os.Getenv(envRacerLog)
	db := testdb.Open(t, sqllock.MySQL)
	l, err := tablelock.New(db.DB, sqllock.MySQL, tablelock.WithTTL(racerTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := fence.New(sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for { // until the parent kills this process
				lease, err := l.Acquire(ctx, key)
				if err != nil {
					say("ERR %v", err)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				say("HELD %d", lease.Token())
				time.Sleep(20 * time.Millisecond) // a pause may land here
				err = write(ctx, db.DB, f, logTable, lease.Token())
				if errors.Is(err, sqllock.ErrStaleToken) {
					say("STALE %d %v", lease.Token(), err)
				} else if err != nil {
					say("ERR %v", err)
				}
				_ = lease.Release(ctx)
			}
		})
	}
	wg.Wait()
}

// write is one fenced write: the check and the row in one transaction.
func write(ctx context.Context, db *sql.DB, f *fence.Fence, table string, token int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f.Check(ctx, tx, table, token); err != nil { // the log table names the resource
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (token, pid) VALUES (?, ?)", token, os.Getpid()); err != nil {
		return err
	}
	return tx.Commit()
}
