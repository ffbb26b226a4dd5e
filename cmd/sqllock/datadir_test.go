package main

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sqllockEnv runs the binary like sqllockCmd, with HOME, XDG_STATE_HOME
// and TMPDIR taken from env alone.
func sqllockEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(envWithout("HOME", "XDG_STATE_HOME", "TMPDIR", "SQLLOCK_DSN"), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running sqllock %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// envWithout is the test's environment without the variables named.
func envWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			keep = keep && name != n
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

func wantPerm(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %v, want %v", path, got, want)
	}
}

// Without --dsn or --data-dir the embedded database lives in the user's
// own state folder ($XDG_STATE_HOME/sqllock, else ~/.local/state/sqllock),
// created 0700, its file 0600 and so its WAL and shared-memory files,
// which SQLite gives the database's mode: never in the temporary
// directory, where another user may have made the folder first. The demo
// still starts with one command on a fresh machine, HOME and no XDG
// variable, as root in CI.
func TestDefaultDataDir(t *testing.T) {
	for _, xdg := range []bool{false, true} {
		name := "HOME"
		if xdg {
			name = "XDG_STATE_HOME"
		}
		t.Run(name, func(t *testing.T) {
			home, tmp := t.TempDir(), t.TempDir()
			env := []string{"HOME=" + home, "TMPDIR=" + tmp}
			dir := filepath.Join(home, ".local", "state", "sqllock")
			if xdg {
				state := filepath.Join(t.TempDir(), "state")
				env = append(env, "XDG_STATE_HOME="+state)
				dir = filepath.Join(state, "sqllock")
			}
			r := sqllockEnv(t, env, "demo", "stock", "--strategy", "tablelock", "--units", "40", "--workers", "4")
			r.want(t, 0, "tablelock", "oversold")
			wantPerm(t, dir, 0o700)
			if !xdg {
				wantPerm(t, filepath.Dir(dir), 0o700) // made for sqllock: XDG's mode
			}
			wantPerm(t, filepath.Join(dir, "sqllock.db"), 0o600)
			if _, err := os.Stat(filepath.Join(tmp, "sqllock")); err == nil {
				t.Errorf("the temporary directory has a sqllock folder: the default still uses it")
			}

			// While a holder has the database open, its WAL and shared
			// memory files exist: 0600 too.
			holder := exec.Command(bin, "hold", "wal-mode", "--for", "2m")
			holder.Env = append(envWithout("HOME", "XDG_STATE_HOME", "TMPDIR", "SQLLOCK_DSN"), env...)
			out, err := holder.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
			held := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(out)
				sc.Scan()
				held <- sc.Text()
				for sc.Scan() {
				}
			}()
			select {
			case l := <-held:
				if !strings.HasPrefix(l, "held") {
					t.Fatalf("holder said %q, want held", l)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the holder never took the lock")
			}
			for _, suffix := range []string{"-wal", "-shm"} {
				wantPerm(t, filepath.Join(dir, "sqllock.db"+suffix), 0o600)
			}
		})
	}
}

// A default folder that anyone may write to, or that another user owns,
// is refused with a message that names it, says why and how to go on; it
// is left as it was. (The old default, $TMPDIR/sqllock, is planted too:
// a command that still used it would run.)
func TestDefaultDataDirRefused(t *testing.T) {
	cases := []struct {
		name  string
		plant func(t *testing.T, dir string)
		why   string
	}{
		{"writable by others", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, "writable by other users"},
		{"writable by the group", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o770); err != nil {
				t.Fatal(err)
			}
		}, "writable by other users"},
		{"another user's", func(t *testing.T, dir string) {
			if os.Getuid() != 0 {
				t.Skip("only root can give a folder to another user")
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "belongs to uid 65534"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home, tmp := t.TempDir(), t.TempDir()
			dir := filepath.Join(home, ".local", "state", "sqllock")
			for _, d := range []string{dir, filepath.Join(tmp, "sqllock")} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
				c.plant(t, d)
			}
			r := sqllockEnv(t, []string{"HOME=" + home, "TMPDIR=" + tmp}, "locks")
			r.want(t, exitBadDSN, dir, c.why, "--data-dir")
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 0 {
				t.Errorf("the refused folder holds %v (%v), want it left empty", entries, err)
			}
		})
	}
}
