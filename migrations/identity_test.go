package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// identityTables lists every table the migrations create with the columns
// that name something: a key, an owner, a job, a fenced resource. insert
// takes one parameter per identity column, in order; NOW stands for the
// dialect's current time.
var identityTables = []struct {
	table   string
	columns []string
	insert  string
	sqlite  bool // the table exists on SQLite too
}{
	{"sqllock_locks", []string{"lock_key", "owner"},
		"INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at) VALUES (?, ?, 'h', 1, 1, NOW, NOW)", true},
	{"sqllock_rows", []string{"lock_key"}, "INSERT INTO sqllock_rows (lock_key, token) VALUES (?, 0)", false},
	{"sqllock_versions", []string{"lock_key"}, "INSERT INTO sqllock_versions (lock_key, version) VALUES (?, 1)", true},
	{"sqllock_jobs", []string{"lock_key", "owner"},
		"INSERT INTO sqllock_jobs (lock_key, owner, host, hold_count, token, acquired_at, expires_at) VALUES (?, ?, 'h', 1, 1, NOW, NOW)", true},
	{"sqllock_fence_tokens", []string{"resource"}, "INSERT INTO sqllock_fence_tokens (resource, last_token) VALUES (?, 1)", true},
}

// TestIdentityColumnsCompareBytes: in every table, two identities that
// differ only in case or only in trailing space are different values. A
// column that folded them (MariaDB's default utf8mb4_general_ci is
// case-insensitive and PAD SPACE) would let one owner release another's
// lock, or two keys share one row.
func TestIdentityColumnsCompareBytes(t *testing.T) {
	variants := []string{"Worker-A", "worker-a", "WORKER-A", "Worker-A ", "Worker-A  "}
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			ctx := context.Background()
			db := testdb.Scratch(t, d)
			if err := migrations.Up(ctx, db.DB, d); err != nil {
				t.Fatal(err)
			}
			now := map[sqllock.Dialect]string{sqllock.Postgres: "now()", sqllock.MariaDB: "UTC_TIMESTAMP(6)", sqllock.MySQL: "UTC_TIMESTAMP(6)", sqllock.SQLite: "0"}[d]
			for _, tb := range identityTables {
				if d == sqllock.SQLite && !tb.sqlite {
					continue
				}
				insert := rebind(d, strings.ReplaceAll(tb.insert, "NOW", now))
				for ci, col := range tb.columns {
					for vi, v := range variants {
						args := make([]any, len(tb.columns))
						for cj := range tb.columns {
							args[cj] = fmt.Sprintf("other-%s-%d", col, vi) // unique in its column
						}
						args[ci] = v
						if _, err := db.ExecContext(ctx, insert, args...); err != nil {
							t.Errorf("%s.%s: %q collides with a look-alike already stored: %v", tb.table, col, v, err)
						}
					}
					count := rebind(d, "SELECT count(*) FROM "+tb.table+" WHERE "+col+" = ?")
					for _, v := range variants {
						var n int
						if err := db.QueryRowContext(ctx, count, v).Scan(&n); err != nil {
							t.Fatal(err)
						}
						if n != 1 {
							t.Errorf("%s.%s = %q matches %d rows of %q; want only its own", tb.table, col, v, n, variants)
						}
					}
				}
			}
		})
	}
}

// rebind turns ? placeholders into PostgreSQL's $n.
func rebind(d sqllock.Dialect, q string) string {
	if d != sqllock.Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestOwnerMigrationKeepsRows: on a MySQL database migrated by an earlier
// release, 00006 turns the owner columns byte-exact and keeps the locks and
// jobs held meanwhile; its Down gives the varchar columns back, rows intact.
func TestOwnerMigrationKeepsRows(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.MariaDB)
	p, err := migrations.NewProvider(db.DB, sqllock.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	const owner = "Worker-Ä/7" // not ASCII: the bytes must survive both ways
	for _, q := range []string{
		"INSERT INTO sqllock_locks (lock_key, owner, host, hold_count, token, acquired_at, expires_at) VALUES ('k', ?, 'h', 2, 7, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)",
		"INSERT INTO sqllock_jobs (name, owner, locked_by, token, locked_at, locked_until) VALUES ('k', ?, 'h', 8, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)",
	} {
		if _, err := db.ExecContext(ctx, q, owner); err != nil {
			t.Fatal(err)
		}
	}
	if got := ownerMatches(t, db, owner); got != 2 {
		t.Fatalf("before 00006: %d rows owned by %q, want 2", got, owner)
	}
	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if got := ownerMatches(t, db, owner); got != 2 {
		t.Fatalf("after 00006: %d rows owned by %q, want 2", got, owner)
	}
	if got := ownerMatches(t, db, strings.ToLower(owner)); got != 0 {
		t.Fatalf("after 00006: %d rows owned by %q match %q, want 0", got, owner, strings.ToLower(owner))
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if got := ownerMatches(t, db, owner); got != 2 {
		t.Fatalf("after 00006 down: %d rows owned by %q, want 2", got, owner)
	}
}

// ownerMatches counts the rows of sqllock_locks and sqllock_jobs whose
// owner equals o.
func ownerMatches(t *testing.T, db *testdb.DB, o string) int {
	t.Helper()
	var n int
	err := db.QueryRow("SELECT (SELECT count(*) FROM sqllock_locks WHERE owner = ?) + (SELECT count(*) FROM sqllock_jobs WHERE owner = ?)", o, o).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
