package main

import (
	"io/fs"
	"path"
	"slices"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
)

// TestDownDescribed: migrate down can say what every shipped migration's
// Down section drops, so its refusal without --force is never vague.
func TestDownDescribed(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite} {
		dir, err := migrations.Dir(d)
		if err != nil {
			t.Fatal(err)
		}
		files, err := fs.Glob(migrations.FS, dir+"/*.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("%v: no migrations (%v)", d, err)
		}
		for _, f := range files {
			drops, changes, err := downObjects(d, path.Base(f))
			if err != nil || len(drops)+len(changes) == 0 {
				t.Errorf("%s: drops %q, changes %q, %v; want what it drops or changes named", f, drops, changes, err)
			}
		}
	}
}

// TestDownDescribedBlock: a function body restored in a Down section (a
// goose StatementBegin block, semicolons inside) is one change.
func TestDownDescribedBlock(t *testing.T) {
	drops, changes, err := downObjects(sqllock.Postgres, "00014_inline_token.sql")
	if err != nil || !slices.Equal(drops, []string{"function sqllock_refuse_token"}) ||
		!slices.Equal(changes, []string{"function sqllock_next_token", "sequence sqllock_fence_seq"}) {
		t.Fatalf("drops %q, changes %q, %v", drops, changes, err)
	}
}

// TestDownDescribedRedefined: on MySQL a function is dropped and created
// again (no CREATE OR REPLACE FUNCTION there), and rows written to raise a
// counter: both are changes, nothing is dropped.
func TestDownDescribedRedefined(t *testing.T) {
	drops, changes, err := downObjects(sqllock.MariaDB, "00015_one_token_source.sql")
	if err != nil || len(drops) != 0 ||
		!slices.Equal(changes, []string{"table sqllock_tickets", "function sqllock_next_token"}) {
		t.Fatalf("drops %q, changes %q, %v", drops, changes, err)
	}
}
