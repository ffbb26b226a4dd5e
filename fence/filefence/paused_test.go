package filefence_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/fence/filefence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// The paused writer child runs TestPausedWriterChild with these.
const (
	envChild    = "SQLLOCK_FILEFENCE_CHILD" // the dialect
	envMode     = "SQLLOCK_FILEFENCE_MODE"  // "before" or "inside"
	envKey      = "SQLLOCK_FILEFENCE_KEY"
	envPath     = "SQLLOCK_FILEFENCE_PATH"
	pausedTTL   = time.Second
	childWriter = "A"
)

func line(who string, token int64, n int) []byte {
	return fmt.Appendf(nil, "%s token=%d line=%d at=%s\n", who, token, n, time.Now().Format("15:04:05.000"))
}

// appendLine appends who's line n through f, stamped when it is written.
func appendLine(ctx context.Context, f *filefence.File, who string, token int64, n int) error {
	return f.Write(ctx, token, func(data *os.File) error {
		if _, err := data.Seek(0, io.SeekEnd); err != nil {
			return err
		}
		_, err := data.Write(line(who, token, n))
		return err
	})
}

// outcome names an error for the child's report.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sqllock.ErrStaleToken):
		return "stale"
	case errors.Is(err, sqllock.ErrLockLost):
		return "lost"
	}
	return "error " + strings.ReplaceAll(err.Error(), "\n", " ")
}

// TestPausedWriterChild is holder A of TestPausedWriterRefused, in its own
// process so that SIGSTOP pauses all of it, renewal included. It does
// nothing in a normal run.
func TestPausedWriterChild(t *testing.T) {
	ds := os.Getenv(envChild)
	if ds == "" {
		t.Skip("only runs as a child process of TestPausedWriterRefused")
	}
	d, err := sqllock.ParseDialect(ds)
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.Open(t, d)
	l, err := tablelock.New(db.DB, d, tablelock.WithTTL(pausedTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := filefence.New(os.Getenv(envPath))
	if err != nil {
		t.Fatal(err)
	}
	stdin := bufio.NewScanner(os.Stdin)
	goAhead := func() error {
		if !stdin.Scan() {
			return errors.New("no go-ahead from the parent")
		}
		return nil
	}
	err = sqllock.Do(context.Background(), l, os.Getenv(envKey), func(ctx context.Context) error {
		token, _ := sqllock.TokenFrom(ctx)
		if err := f.Append(ctx, token, line(childWriter, token, 1)); err != nil {
			return err
		}
		fmt.Printf("HELD %d\n", token)
		// The late write of a holder that does not look again: it ignores
		// ctx, which the loss has cancelled by the time it runs. Only the
		// token beside the file is in its way.
		late := context.WithoutCancel(ctx)
		switch os.Getenv(envMode) {
		case "before":
			// About to write: the parent stops the process here.
			fmt.Println("READY")
			if err := goAhead(); err != nil {
				return err
			}
			fmt.Printf("WRITE %s\n", outcome(f.Append(late, token, line(childWriter, token, 2))))
			// With its own context, as a holder that checks ctx would.
			fmt.Printf("AGAIN %s\n", outcome(f.Append(ctx, token, line(childWriter, token, 3))))
		case "inside":
			// Past the check, holding the file's lock: stopped here.
			err := f.Write(late, token, func(data *os.File) error {
				fmt.Println("READY")
				if err := goAhead(); err != nil {
					return err
				}
				if _, err := data.Seek(0, io.SeekEnd); err != nil {
					return err
				}
				_, err := data.Write(line(childWriter, token, 2))
				return err
			})
			fmt.Printf("WRITE %s\n", outcome(err))
		}
		return nil
	})
	fmt.Printf("DO %s\n", outcome(err))
}

// TestPausedWriterRefused: a holder A with a 1s TTL appends a line to a
// fenced file, then is stopped (SIGSTOP) past its TTL; B takes the key
// with a larger token and appends; A is continued (SIGCONT). Stopped
// before its write ("before"), A's write is refused with ErrStaleToken.
// Stopped inside it, past the check and holding the file's lock
// ("inside"), A blocks B's write until it resumes and finishes, and B's
// line lands after A's. Either way no line lands after one with a larger
// token.
func TestPausedWriterRefused(t *testing.T) {
	for _, d := range testdb.Dialects {
		for _, mode := range []string{"before", "inside"} {
			t.Run(d.String()+"/"+mode, func(t *testing.T) {
				t.Parallel()
				db := testdb.Open(t, d)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				key := locktest.Key(t)
				path := filepath.Join(t.TempDir(), "out.log")
				cmd := testdb.Child(t, "TestPausedWriterChild", envChild+"="+d.String(),
					envMode+"="+mode, envKey+"="+key, envPath+"="+path)
				stdin, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				lines := bufio.NewScanner(stdout)
				var tokenA int64
				for lines.Scan() && lines.Text() != "READY" {
					if s, ok := strings.CutPrefix(lines.Text(), "HELD "); ok {
						tokenA, _ = strconv.ParseInt(s, 10, 64)
					}
				}
				if tokenA == 0 {
					t.Fatalf("holder A never reported its token and READY: %v", lines.Err())
				}
				if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				waitStopped(t, cmd.Process.Pid)

				b, err := tablelock.New(db.DB, d, tablelock.WithTTL(pausedTTL))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				f, err := filefence.New(path)
				if err != nil {
					t.Fatal(err)
				}
				held, bDone := make(chan int64, 1), make(chan error, 1)
				go func() {
					// B waits out A's TTL, then appends.
					bDone <- sqllock.Do(ctx, b, key, func(ctx context.Context) error {
						token, _ := sqllock.TokenFrom(ctx)
						held <- token
						return appendLine(ctx, f, "B", token, 1)
					})
				}()
				var tokenB int64
				select {
				case tokenB = <-held:
				case err := <-bDone:
					t.Fatalf("B: %v", err)
				}
				if tokenB <= tokenA {
					t.Fatalf("B's token %d not above paused A's %d", tokenB, tokenA)
				}
				if mode == "before" {
					if err := <-bDone; err != nil {
						t.Fatalf("B: %v", err)
					}
				} else {
					// A holds the file's lock, stopped: B cannot write.
					time.Sleep(300 * time.Millisecond)
					if got := read(t, path); strings.Contains(got, "B ") {
						t.Fatalf("B wrote while stopped A held the file's lock:\n%s", got)
					}
				}

				if _, err := io.WriteString(stdin, "go\n"); err != nil {
					t.Fatal(err)
				}
				if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				report := map[string]string{}
				for lines.Scan() {
					if verb, rest, ok := strings.Cut(lines.Text(), " "); ok && (verb == "WRITE" || verb == "AGAIN" || verb == "DO") {
						report[verb] = rest
					}
				}
				if err := cmd.Wait(); err != nil {
					t.Fatalf("holder A: %v (report %q)", err, report)
				}
				if mode == "inside" {
					if err := <-bDone; err != nil {
						t.Fatalf("B: %v", err)
					}
				}
				content := read(t, path)
				t.Logf("A (token %d) after the pause: %q; B's token %d; the file:\n%s", tokenA, report, tokenB, content)

				want := map[string]string{"WRITE": "stale", "AGAIN": "stale", "DO": "lost"}
				wantLines := []string{"A 1", "B 1"}
				if mode == "inside" {
					want = map[string]string{"WRITE": "ok", "DO": "lost"}
					wantLines = []string{"A 1", "A 2", "B 1"}
				}
				for verb, w := range want {
					if report[verb] != w {
						t.Errorf("A's %s: %q, want %s", verb, report[verb], w)
					}
				}
				assertTokenOrder(t, content)
				if got := whoLines(content); strings.Join(got, ",") != strings.Join(wantLines, ",") {
					t.Errorf("file lines %q, want %q", got, wantLines)
				}
				if last, err := f.Last(ctx); err != nil || last != tokenB {
					t.Errorf("the file's token is %d, %v; want B's %d", last, err, tokenB)
				}
			})
		}
	}
}

// TestFenceWriteDoesNotFenceAFile shows, on each dialect, what the fence
// cannot refuse, and filefence doing it instead. A appends to a file
// inside fence.Write's callback, and its lease is lost there (a force
// release; on SQLite, A's open write transaction keeps its own renewals
// out until the lease expires): the loss cancels A's context and
// database/sql rolls the fence's transaction back, but the callback goes
// on. B takes the key and writes through the fence, then A appends once
// more: the line lands after B's. With filefence the same late append is
// refused.
func TestFenceWriteDoesNotFenceAFile(t *testing.T) {
	for _, d := range testdb.Dialects {
		for _, withFile := range []bool{false, true} {
			name := d.String() + "/fence.Write callback"
			if withFile {
				name = d.String() + "/filefence"
			}
			t.Run(name, func(t *testing.T) {
				if d != sqllock.SQLite {
					// SQLite's one writer: an open transaction of one
					// case would starve the other's renewals.
					t.Parallel()
				}
				db := testdb.Open(t, d)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				key := locktest.Key(t)
				path := filepath.Join(t.TempDir(), "out.log")
				ff, err := filefence.New(path)
				if err != nil {
					t.Fatal(err)
				}
				fc, err := fence.New(d)
				if err != nil {
					t.Fatal(err)
				}
				l, err := tablelock.New(db.DB, d, tablelock.WithTTL(pausedTTL))
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				write := func(ctx context.Context, who string, n int) error {
					token, _ := sqllock.TokenFrom(ctx)
					if withFile {
						return appendLine(context.WithoutCancel(ctx), ff, who, token, n)
					}
					out, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
					if err != nil {
						return err
					}
					defer out.Close()
					_, err = out.Write(line(who, token, n))
					return err
				}

				a, err := l.Acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				lost, next, aDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
				var lateErr error
				go func() {
					aDone <- sqllock.DoLease(ctx, a, func(ctx context.Context) error {
						return fc.Write(ctx, db.DB, key, func(*sql.Tx) error {
							if err := write(ctx, "A", 1); err != nil {
								return err
							}
							<-ctx.Done() // the loss
							close(lost)
							<-next
							// A's callback does not look at ctx again.
							lateErr = write(ctx, "A", 2)
							return lateErr
						})
					})
				}()
				if d != sqllock.SQLite {
					if _, err := l.ForceRelease(ctx, key, a.Token()); err != nil {
						t.Fatal(err)
					}
				}
				select {
				case <-lost:
				case err := <-aDone:
					t.Fatalf("A ended before its callback saw the loss: %v", err)
				case <-ctx.Done():
					t.Fatal("A never saw its loss")
				}
				err = sqllock.Do(ctx, l, key, func(ctx context.Context) error {
					return fc.Write(ctx, db.DB, key, func(*sql.Tx) error { return write(ctx, "B", 1) })
				})
				if err != nil {
					t.Fatalf("B: %v", err)
				}
				close(next)
				aErr := <-aDone
				content := read(t, path)
				t.Logf("A's late append: %v; A's Write: %v; the file:\n%s", lateErr, aErr, content)
				got := strings.Join(whoLines(content), ",")
				if withFile {
					if !errors.Is(lateErr, sqllock.ErrStaleToken) {
						t.Errorf("A's late append through filefence: %v, want ErrStaleToken", lateErr)
					}
					assertTokenOrder(t, content)
					if got != "A 1,B 1" {
						t.Errorf("file lines %s, want A 1,B 1", got)
					}
					return
				}
				// The fence refused A's transaction, and could not refuse
				// its append: the stale line is after B's.
				if !errors.Is(aErr, sqllock.ErrLockLost) {
					t.Errorf("A's fence.Write: %v, want ErrLockLost", aErr)
				}
				if got != "A 1,B 1,A 2" {
					t.Errorf("file lines %s, want A 1,B 1,A 2 (the hazard this test documents)", got)
				}
			})
		}
	}
}

// whoLines returns each line's writer and line number, "A 1".
func whoLines(content string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(content), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 {
			out = append(out, f[0]+" "+strings.TrimPrefix(f[2], "line="))
		}
	}
	return out
}

// assertTokenOrder fails t when a line carries a token smaller than an
// earlier line's: a stale line after a newer one.
func assertTokenOrder(t *testing.T, content string) {
	t.Helper()
	var prev int64
	for _, l := range strings.Split(strings.TrimSpace(content), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		tok, _ := strconv.ParseInt(strings.TrimPrefix(f[1], "token="), 10, 64)
		if tok < prev {
			t.Errorf("stale line %q after a line with token %d", l, prev)
		}
		prev = max(prev, tok)
	}
}

// waitStopped waits until every thread of process pid is stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(stats) == 0 {
			t.Skipf("cannot read the state of process %d: %v", pid, err)
		}
		stopped := true
		for _, p := range stats {
			b, err := os.ReadFile(p)
			// The state follows the parenthesised command name.
			i := strings.LastIndexByte(string(b), ')')
			if err != nil || i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d did not stop", pid)
}
