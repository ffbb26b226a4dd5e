package main

import (
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/golden"
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
		{"baseline-mysql.sql", sqllock.MySQL},
		{"baseline-mysql-common.sql", sqllock.MySQLCommon},
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
