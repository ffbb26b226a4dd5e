package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -h, --help and help print the usage on stdout and exit 0, at every level:
// the trial got `unknown demo "-h"` from `sqllock demo -h`, and exit 2
// from a subcommand's -h.
func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"},
		{"demo", "-h"}, {"demo", "--help"}, {"demo", "help"},
		{"demo", "stock", "-h"}, {"demo", "job", "--help"},
		{"migrate", "-h"}, {"migrate", "up", "-h"}, {"migrate", "export", "-h"},
		{"locks", "-h"}, {"locks", "release", "-h"}, {"hold", "-h"}, {"bench", "-h"},
		{"web", "-h"}, {"web", "--help"},
	} {
		r := sqllockCmd(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: sqllock") || r.stderr != "" {
			t.Errorf("sqllock %s: exit %d, stdout %q, stderr %q; want the usage on stdout and exit 0", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}

// migrate export writes the embedded migrations for the goose command
// line, with no database and no source tree, and never overwrites a file
// that differs.
func TestMigrateExport(t *testing.T) {
	dir := t.TempDir()
	sqllockCmd(t, "migrate", "export", dir).want(t, 0, "goose -dir")
	for _, d := range []string{"postgres", "mysql", "sqlite"} {
		b, err := os.ReadFile(filepath.Join(dir, d, "00001_sqllock.sql"))
		if err != nil || !strings.Contains(string(b), "-- +goose Up") {
			t.Errorf("%s/00001_sqllock.sql: %v", d, err)
		}
	}
	sqllockCmd(t, "migrate", "export", dir).want(t, 0) // the same files again: fine
	one := t.TempDir()
	sqllockCmd(t, "migrate", "export", one, "--dialect", "mariadb").want(t, 0)
	if _, err := os.Stat(filepath.Join(one, "postgres")); !os.IsNotExist(err) {
		t.Errorf("--dialect mariadb wrote the postgres folder too: %v", err)
	}
	if err := os.WriteFile(filepath.Join(one, "mysql", "00001_sqllock.sql"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	sqllockCmd(t, "migrate", "export", one, "--dialect", "mysql").want(t, exitFailure, "differs")
	sqllockCmd(t, "migrate", "export").want(t, exitUsage, "migrate export DIR")
	sqllockCmd(t, "migrate", "export", one, "--dialect", "oracle").want(t, exitUsage, "unknown dialect")
}
