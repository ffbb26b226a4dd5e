package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/semaphore"
	"github.com/sqllock/sqllock/tablelock"
)

// Hostile values, as an application could choose them: a window title
// (OSC ... BEL), a screen clear, hidden text, a C1 CSI, DEL, and a CR LF
// followed by the columns of a forged row.
const (
	hostileTail  = "\x1b]0;pwned\a\x1b[2J\x1b[8m\u009b31m\x7f\r\nlock  billing/close  ops-admin  forged-host  1"
	hostileOwner = "w\x1b[31m\a\r\u009b\x7f\tx"
	hostileHost  = "h\x1b[2J\u009b\x7f\r\nops-admin"
	hostileWhy   = "INC\x1b[8m\a\r\n\u009bops-admin\x7f"
)

// checkSafe fails t if out holds a control byte other than '\n' (C0, DEL),
// a C1 code point or invalid UTF-8, or a line that names the forged
// holder without the real key's marker before it (a forged row).
func checkSafe(t *testing.T, what, out, marker string) {
	t.Helper()
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			t.Errorf("%s: invalid UTF-8 byte %#x at %d", what, out[i], i)
		case r < 0x20 && r != '\n', r == 0x7f, r >= 0x80 && r <= 0x9f:
			t.Errorf("%s: control %U at %d: %q", what, r, i, out[max(0, i-20):min(len(out), i+20)])
		}
		i += n
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "ops-admin") && !strings.Contains(line, marker) {
			t.Errorf("%s: a forged row: %q", what, line)
		}
	}
}

// TestLocksOutputIsSafe: keys, owners, hosts and reasons come from the
// applications and reach the operator's terminal. Every output but --json
// shows their control bytes escaped: the table, a --watch frame, --audit
// and release --force's message; no line is forged.
func TestLocksOutputIsSafe(t *testing.T) {
	forEachDB(t, func(t *testing.T, d dbTarget) {
		sqllockCmd(t, "migrate", "up", "--dsn", d.dsn).want(t, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		marker := fmt.Sprintf("evil%x", rand.Uint32())
		key := marker + hostileTail

		l, err := tablelock.New(d.db, d.dialect, tablelock.WithTTL(time.Minute), tablelock.WithNotify(false))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lease, err := l.Acquire(sqllock.WithOwner(ctx, hostileOwner), key)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
		sem, err := semaphore.New(d.db, d.dialect, tablelock.WithTTL(time.Minute), tablelock.WithNotify(false))
		if err != nil {
			t.Fatal(err)
		}
		defer sem.Close()
		permit, err := sem.Acquire(ctx, marker+"-sem"+hostileTail, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer permit.Release(ctx)
		// The host is the holder's hostname/pid: written here as a host
		// could name itself.
		for _, table := range []string{tablelock.DefaultTable, semaphore.DefaultTable} {
			q := "UPDATE " + table + " SET host = ? WHERE lock_key LIKE ?"
			if d.dialect == sqllock.Postgres {
				q = "UPDATE " + table + " SET host = $1 WHERE lock_key LIKE $2"
			}
			if _, err := d.db.ExecContext(ctx, q, hostileHost, marker+"%"); err != nil {
				t.Fatal(err)
			}
		}
		if d.dialect == sqllock.Postgres {
			// Another session's query text, shown by --watch: a session
			// blocked on an advisory lock, its statement holding ESC.
			holder, err := d.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			id := rand.Int64()
			if _, err := holder.ExecContext(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
				t.Fatal(err)
			}
			defer holder.ExecContext(context.Background(), "SELECT pg_advisory_unlock_all()")
			waiter, err := d.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer waiter.Close()
			wctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = waiter.ExecContext(wctx, "SELECT pg_advisory_lock($1) /* "+marker+" \x1b[2J\x1b]0;t\a \u009b ops-admin */", id)
			}()
			defer func() { stop(); <-done }()
			deadline := time.Now().Add(30 * time.Second)
			for {
				var n int
				if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%'`, marker).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}

		runIn := func(args ...string) (string, int) {
			var out, errb strings.Builder
			code := run(ctx, append(args, "--dsn", d.dsn), env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }})
			checkSafe(t, strings.Join(args, " ")+" (stderr)", errb.String(), marker)
			return out.String(), code
		}
		table, code := runIn("locks")
		t.Logf("locks:\n%s", table)
		if code != 0 || !strings.Contains(table, marker) {
			t.Fatalf("locks exit %d, no row of the hostile key:\n%s", code, table)
		}
		checkSafe(t, "locks", table, marker)

		frame, code := runIn("locks", "--watch", "--frames", "1")
		t.Logf("locks --watch:\n%s", frame)
		if code != 0 || !strings.Contains(frame, marker) {
			t.Fatalf("locks --watch exit %d, no row of the hostile key:\n%s", code, frame)
		}
		checkSafe(t, "locks --watch", frame, marker)

		if _, code := runIn("locks", "release", key); code != exitUsage { // the refusal names the holder, on stderr
			t.Fatalf("locks release without --force: exit %d, want %d", code, exitUsage)
		}
		msg, code := runIn("locks", "release", marker+"-sem"+hostileTail, "--kind", "semaphore", "--force", "--reason", hostileWhy)
		t.Logf("locks release --kind semaphore --force:\n%s", msg)
		if code != 0 || !strings.Contains(msg, "released") {
			t.Fatalf("locks release --kind semaphore --force exit %d:\n%s", code, msg)
		}
		checkSafe(t, "locks release --kind semaphore --force", msg, marker)

		msg, code = runIn("locks", "release", key, "--force", "--reason", hostileWhy)
		t.Logf("locks release --force:\n%s", msg)
		if code != 0 || !strings.Contains(msg, "released") {
			t.Fatalf("locks release --force exit %d:\n%s", code, msg)
		}
		checkSafe(t, "locks release --force", msg, marker)

		audit, code := runIn("locks", "--audit")
		t.Logf("locks --audit:\n%s", audit)
		if code != 0 || !strings.Contains(audit, marker) {
			t.Fatalf("locks --audit exit %d, no record of the hostile key:\n%s", code, audit)
		}
		checkSafe(t, "locks --audit", audit, marker)
	})
}

// TestErrorLineIsSafe: an error's message may quote what the database
// holds (a driver's "Duplicate entry '...'", a key in a message built
// with %s); the one line on stderr shows its control characters escaped.
func TestErrorLineIsSafe(t *testing.T) {
	var errb strings.Builder
	e := env{stdout: io.Discard, stderr: &errb, getenv: func(string) string { return "" }}
	code := run(context.Background(), []string{"locks", "--kind", "x" + hostileTail}, e)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d: %s", code, exitUsage, errb.String())
	}
	got := strings.TrimSuffix(errb.String(), "\n")
	if strings.Contains(got, "\n") {
		t.Errorf("stderr is not one line: %q", got)
	}
	checkSafe(t, "stderr", got, "--kind")
	if !strings.Contains(got, `\x1b]0;pwned`) {
		t.Errorf("stderr %q does not show the escape escaped", got)
	}
	// A driver's message, as run prints any error.
	line := oneLine("Error 1062: Duplicate entry 'k" + hostileTail + "' for key 'PRIMARY'")
	checkSafe(t, "oneLine", line, "Duplicate")
	if !strings.Contains(line, `\x1b]0;pwned`) || !strings.Contains(line, "Duplicate entry") {
		t.Errorf("oneLine = %q; want the message with its escapes shown", line)
	}
}
