package e2e_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/fence"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// The fenced writer child runs TestFencedWriterChild with these.
const (
	envFencedChild   = "SQLLOCK_FENCED_CHILD" // the dialect
	envFencedKey     = "SQLLOCK_FENCED_KEY"
	envFencedTable   = "SQLLOCK_FENCED_TABLE"
	envFencedTTL     = "SQLLOCK_FENCED_TTL"
	fencedPausedTTL  = time.Second
	fencedChildValue = "A"
)

// fencedWrite is the protected write: in one transaction, check token
// against the fence for resource, then store value and token in the
// resource's row.
func fencedWrite(ctx context.Context, db *testdb.DB, f *fence.Fence, table, resource string, token int64, value string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f.Check(ctx, tx, resource, token); err != nil {
		return err
	}
	if err := setResource(ctx, tx, db.Dialect, table, token, value); err != nil {
		return err
	}
	return tx.Commit()
}

func setResource(ctx context.Context, tx *sql.Tx, d sqllock.Dialect, table string, token int64, value string) error {
	q := "UPDATE " + table + " SET v = ?, token = ? WHERE id = 1"
	if d == sqllock.Postgres {
		q = "UPDATE " + table + " SET v = $1, token = $2 WHERE id = 1"
	}
	_, err := tx.ExecContext(ctx, q, value, token)
	return err
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

// TestFencedWriterChild is holder A of TestPausedHolderIsFenced, in its own
// process so that SIGSTOP pauses all of it, renewal included. It does
// nothing in a normal run.
func TestFencedWriterChild(t *testing.T) {
	ds := os.Getenv(envFencedChild)
	if ds == "" {
		t.Skip("only runs as a child process of TestPausedHolderIsFenced")
	}
	d, err := sqllock.ParseDialect(ds)
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.Open(t, d)
	ttl, err := time.ParseDuration(os.Getenv(envFencedTTL))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tablelock.New(db.DB, d, tablelock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := fence.New(d)
	if err != nil {
		t.Fatal(err)
	}
	key, table := os.Getenv(envFencedKey), os.Getenv(envFencedTable)
	stdin := bufio.NewScanner(os.Stdin)
	ctx := context.Background()
	err = sqllock.Do(ctx, l, key, func(ctx context.Context) error {
		token, _ := sqllock.TokenFrom(ctx)
		fmt.Printf("HELD %d\n", token)
		// A has checked its lease and is about to write. Here it stalls:
		// the parent stops the whole process past the TTL.
		if !stdin.Scan() {
			return errors.New("no go-ahead from the parent")
		}
		// The late write of a holder that does not look again: it ignores
		// ctx, which the loss has cancelled by now. Only the fence is in
		// its way.
		werr := fencedWrite(context.WithoutCancel(ctx), db, f, table, key, token, fencedChildValue)
		fmt.Printf("WRITE %s\n", outcome(werr))
		// Guard looks at the lease first and refuses without the database.
		fmt.Printf("GUARD %s\n", outcome(f.Guard(ctx, db, key)))
		return nil
	})
	fmt.Printf("DO %s\n", outcome(err))
}

// The paused holder, end to end on every dialect. A takes the key with
// token t and stops (SIGSTOP) before its write, past its TTL; B takes the
// key with t' > t and writes through the fence; A resumes, and its write is
// refused with ErrStaleToken. The resource keeps B's write. The lease could
// not have stopped A: A checked it before the pause.
func TestPausedHolderIsFenced(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			db := testdb.Open(t, d)
			ctx := ctxFor(t)
			key := locktest.Key(t)
			table := fmt.Sprintf("fence_paused_%d", rand.Uint32())
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id INTEGER PRIMARY KEY, v VARCHAR(16) NOT NULL, token BIGINT NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
			if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" (id, v, token) VALUES (1, '', 0)"); err != nil {
				t.Fatal(err)
			}

			cmd := testdb.Child(t, "TestFencedWriterChild", envFencedChild+"="+d.String(),
				envFencedKey+"="+key, envFencedTable+"="+table, envFencedTTL+"="+fencedPausedTTL.String())
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
			for tokenA == 0 && lines.Scan() {
				if s, ok := strings.CutPrefix(lines.Text(), "HELD "); ok {
					tokenA, _ = strconv.ParseInt(s, 10, 64)
				}
			}
			if tokenA == 0 {
				t.Fatalf("holder A never reported its token: %v", lines.Err())
			}

			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			testdb.WaitStopped(t, cmd.Process.Pid)

			// B waits out A's TTL, then writes through the fence.
			b := newTableLocker(t, db, tablelock.WithTTL(fencedPausedTTL))
			f, err := fence.New(d)
			if err != nil {
				t.Fatal(err)
			}
			var tokenB int64
			err = sqllock.Do(ctx, b, key, func(ctx context.Context) error {
				tokenB, _ = sqllock.TokenFrom(ctx)
				return f.Write(ctx, db.DB, key, func(tx *sql.Tx) error {
					return setResource(ctx, tx, d, table, tokenB, "B")
				})
			})
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			if tokenB <= tokenA {
				t.Fatalf("B's token %d not above paused A's %d", tokenB, tokenA)
			}

			// A resumes, with its go-ahead already waiting.
			if _, err := io.WriteString(stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			report := map[string]string{}
			for lines.Scan() {
				if verb, rest, ok := strings.Cut(lines.Text(), " "); ok && (verb == "WRITE" || verb == "GUARD" || verb == "DO") {
					report[verb] = rest
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("holder A: %v (report %q)", err, report)
			}
			t.Logf("A (token %d) after the pause: %q; B wrote with token %d", tokenA, report, tokenB)
			if report["WRITE"] != "stale" {
				t.Errorf("A's late write through the fence: %q, want stale (ErrStaleToken)", report["WRITE"])
			}
			if report["GUARD"] != "lost" {
				t.Errorf("A's Guard after the pause: %q, want lost (ErrLockLost)", report["GUARD"])
			}
			if report["DO"] != "lost" {
				t.Errorf("A's Do: %q, want lost (ErrLockLost)", report["DO"])
			}

			var v string
			var token int64
			if err := db.QueryRowContext(ctx, "SELECT v, token FROM "+table+" WHERE id = 1").Scan(&v, &token); err != nil {
				t.Fatal(err)
			}
			if v != "B" || token != tokenB {
				t.Errorf("resource holds %q with token %d, want B's write with %d", v, token, tokenB)
			}
			if last, err := f.Last(ctx, db, key); err != nil || last != tokenB {
				t.Errorf("fence records %d, %v; want B's token %d", last, err, tokenB)
			}
		})
	}
}
