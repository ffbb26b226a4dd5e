package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The command from a user's module, as `go get -tool` / `go tool` and
// `go install` build it there: a separate temporary module that requires
// sqllock (replaced by this checkout) and imports one library package.
//
// Why a plain `go run github.com/sqllock/sqllock/cmd/sqllock` failed in the
// trial with "missing go.sum entry ... github.com/jmoiron/sqlx": a module's
// go.sum holds checksums only for the modules its own packages need, and
// the application needed only tablelock's. The command also imports
// optimistic (hence sqlx), the MySQL and SQLite drivers and goose, and
// `go run pkg` without a version builds in the user's module, so it needs
// their checksums too. `go get -tool` records them (and the tool); `go
// install pkg@latest` builds in sqllock's own module, with its go.sum,
// like this test's `go install` after the tool is recorded. The README's
// first screen gives those commands.
func TestCommandFromUserModule(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command:", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ourMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(ourMod)
	app := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(app, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\n"+string(goLine)+"\n\nrequire github.com/sqllock/sqllock v0.0.0\n\nreplace github.com/sqllock/sqllock => "+root+"\n")
	write("main.go", `package main

import (
	"fmt"

	"github.com/sqllock/sqllock/tablelock"
)

func main() { fmt.Println("lock table:", tablelock.DefaultTable) }
`)
	gobin := t.TempDir()
	// A build loads only the pruned module graph; a user's module also
	// needs the go.mod files behind dependencies without pruning (stdr's
	// logr). Listing the whole graph here puts them in the module cache.
	list := exec.Command(goTool, "list", "-m", "all")
	list.Dir = root
	if out, err := list.CombinedOutput(); err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	// Then offline: every module the command needs is in the cache.
	// The go command's defaults otherwise (-mod=readonly: go.sum changes
	// only through go get), as in a user's shell.
	env := append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOBIN="+gobin, "SQLLOCK_DSN=")
	run := func(name string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = app, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		t.Logf("%s %s (%v): %v\n%s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, out.String())
		return out.String(), err
	}
	must := func(name string, args ...string) string {
		t.Helper()
		out, err := run(name, args...)
		if err != nil {
			t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
		}
		return out
	}

	// The application itself builds with the library alone.
	must(goTool, "get", "github.com/sqllock/sqllock/tablelock")
	if out := must(goTool, "run", "."); !strings.Contains(out, "lock table: sqllock_locks") {
		t.Fatalf("the application printed %q", out)
	}
	// What the trial ran fails: not enough checksums in the user's go.sum
	// (see above). The wording is the go command's: only the failure is
	// asserted.
	if out, err := run(goTool, "run", "github.com/sqllock/sqllock/cmd/sqllock", "-h"); err == nil {
		t.Errorf("go run of the command without its checksums recorded worked; the README's reason for go get -tool is out of date:\n%s", out)
	}

	// The README's way: record the tool, then run it.
	must(goTool, "get", "-tool", "github.com/sqllock/sqllock/cmd/sqllock")
	data := t.TempDir()
	dsn := "sqlite://" + filepath.Join(data, "app.db")
	if out := must(goTool, "tool", "sqllock", "migrate", "up", "--dsn", dsn); !strings.Contains(out, "up to date") {
		t.Errorf("go tool sqllock migrate up: %q", out)
	}
	if out := must(goTool, "tool", "sqllock", "locks", "--dsn", dsn); !strings.Contains(out, "no locks held") {
		t.Errorf("go tool sqllock locks: %q", out)
	}
	// go install, as a user installs the tool for their shell.
	must(goTool, "install", "github.com/sqllock/sqllock/cmd/sqllock")
	bin := filepath.Join(gobin, "sqllock")
	if out := must(bin, "-h"); !strings.Contains(out, "usage: sqllock") {
		t.Errorf("the installed sqllock -h: %q", out)
	}
	exported := t.TempDir()
	if out := must(bin, "migrate", "export", exported, "--dialect", "postgres"); !strings.Contains(out, "goose -dir") {
		t.Errorf("migrate export: %q", out)
	}
	if _, err := os.Stat(filepath.Join(exported, "postgres", "00001_sqllock.sql")); err != nil {
		t.Error(err)
	}
}
