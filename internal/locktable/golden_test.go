package locktable

import (
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/golden"
)

// goldenTable is the table every golden file names: the default one.
const goldenTable = "sqllock_locks"

// lockTableModes are the modes whose statements differ, per dialect: the
// golden file of each is testdata/<file>. Unprepared (the pooler mode)
// changes how statements run, not their text (TestGoldenModesCovered).
var lockTableModes = []struct {
	file string
	d    sqllock.Dialect
	cfg  Config
}{
	{"postgres.sql", sqllock.Postgres, Config{}},
	{"postgres-async.sql", sqllock.Postgres, Config{AsyncCommit: true}},
	{"postgres-notify.sql", sqllock.Postgres, Config{Notify: true}},
	{"postgres-notify-async.sql", sqllock.Postgres, Config{Notify: true, AsyncCommit: true}},
	{"postgres-fair.sql", sqllock.Postgres, Config{Notify: true, Fair: true}},
	{"postgres-fair-async.sql", sqllock.Postgres, Config{Notify: true, Fair: true, AsyncCommit: true}},
	{"mariadb.sql", sqllock.MariaDB, Config{}},
	{"mysql.sql", sqllock.MySQL, Config{}},
	{"sqlite.sql", sqllock.SQLite, Config{}},
}

// renderStore renders every statement of the store d opens for cfg under
// goldenTable, and the audit trail's reader.
func renderStore(t *testing.T, d sqllock.Dialect, cfg Config) string {
	t.Helper()
	cfg.Table = goldenTable
	st, err := newStore(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stmts := golden.Fields(st)
	for i, s := range stmts {
		if s.Name == "Live" { // the prefix of a statement on n keys: shown with 2
			p := st.sql().param
			stmts[i].SQL = s.SQL + p(1) + ", " + p(2) + ")"
		}
	}
	stmts = append(stmts, golden.Statement{Name: "AuditList", SQL: auditList})
	return golden.Render(stmts)
}

// TestGoldenStatements: every statement of the lock table, in every dialect
// and mode, as testdata/ holds it; go test -update rewrites the files.
func TestGoldenStatements(t *testing.T) {
	for _, m := range lockTableModes {
		t.Run(strings.TrimSuffix(m.file, ".sql"), func(t *testing.T) {
			golden.Check(t, m.file, renderStore(t, m.d, m.cfg))
		})
	}
}

// TestGoldenModesCovered: every combination of the options renders as one
// of the golden files (or is refused), so no mode's statements go unseen.
func TestGoldenModesCovered(t *testing.T) {
	files := map[string]bool{}
	for _, m := range lockTableModes {
		files[renderStore(t, m.d, m.cfg)] = true
	}
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.MySQL, sqllock.SQLite} {
		for bits := range 16 {
			cfg := Config{Table: goldenTable, Notify: bits&1 != 0, Fair: bits&2 != 0, AsyncCommit: bits&4 != 0, Unprepared: bits&8 != 0}
			if _, err := newStore(d, cfg); err != nil {
				continue // refused: Fair without Notify, or where no queue is kept
			}
			if !files[renderStore(t, d, cfg)] {
				t.Errorf("%v with %+v renders statements no golden file holds: add the mode to lockTableModes", d, cfg)
			}
		}
	}
}
