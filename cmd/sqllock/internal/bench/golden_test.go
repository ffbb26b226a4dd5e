package bench

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/cmd/sqllock/internal/lockers"
	"github.com/sqllock/sqllock/internal/golden"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// TestGoldenBaselines: the hand-written statements bench sets each
// strategy beside (the raw lock table, row lock, advisory lock and
// compare-and-swap), per dialect, as testdata/ holds them; go test -update
// rewrites the files.
func TestGoldenBaselines(t *testing.T) {
	for _, c := range []struct {
		file string
		d    sqllock.Dialect
	}{
		{"baseline-postgres.sql", sqllock.Postgres},
		{"baseline-mariadb.sql", sqllock.MariaDB},
		{"baseline-mysql.sql", sqllock.MySQL},
		{"baseline-sqlite.sql", sqllock.SQLite},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			tl, err := rawTablelockStatements(c.d)
			if err != nil {
				t.Fatal(err)
			}
			var stmts []golden.Statement
			for _, s := range golden.Fields(tl) {
				stmts = append(stmts, golden.Statement{Name: "Tablelock" + s.Name, SQL: s.SQL})
			}
			if c.d != sqllock.SQLite {
				lock, ensure := rawRowlockStatements(c.d)
				adv, _ := rawAdvisorySQL(c.d)
				stmts = append(stmts,
					golden.Statement{Name: "RowlockLock", SQL: lock},
					golden.Statement{Name: "RowlockEnsure", SQL: ensure},
					golden.Statement{Name: "AdvisoryLock", SQL: adv.lock},
					golden.Statement{Name: "AdvisoryUnlock", SQL: adv.unlock},
					golden.Statement{Name: "AdvisoryUnlockAll", SQL: adv.unlockAll})
				if adv.lockTx != "" {
					stmts = append(stmts, golden.Statement{Name: "AdvisoryLockTx", SQL: adv.lockTx})
				}
			}
			read, write := rawCASStatements(c.d)
			stmts = append(stmts,
				golden.Statement{Name: "CASRead", SQL: read},
				golden.Statement{Name: "CASWrite", SQL: write})
			golden.Check(t, c.file, golden.Render(stmts))
		})
	}
}

// bench's raw GET_LOCK baseline locks the name the advisory Locker locks,
// on both MySQL-family paths, so the server does the same work for both
// sides: a key the Locker holds is in use under the baseline's name. The
// key has capitals, which the case-safe name hashes.
func TestBenchRawAdvisoryLocksLockersName(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.MariaDB, sqllock.MySQL} {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			ctx := context.Background()
			key := "Orders/" + locktest.Key(t)
			l, closeFn, err := lockers.Advisory(db.DB, d, lockers.Opts{})
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			lease, err := l.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release(ctx)
			q, _ := rawAdvisorySQL(d)
			var holder sql.NullInt64
			if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", q.arg(key)).Scan(&holder); err != nil {
				t.Fatal(err)
			}
			if !holder.Valid {
				t.Fatalf("the Locker holds %q, but the baseline's lock %v is free: bench's two sides lock different names", key, q.arg(key))
			}
		})
	}
}
