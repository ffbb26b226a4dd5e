package optimistic

import (
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/golden"
)

// TestGoldenStatements: every statement of the version table (Locker), the
// counter table (Counter) and, for an example table and column list, a
// Table's compare-and-swap, per dialect, as testdata/ holds it; go test
// -update rewrites the files.
func TestGoldenStatements(t *testing.T) {
	for _, c := range []struct {
		file string
		d    sqllock.Dialect
	}{
		{"postgres.sql", sqllock.Postgres},
		{"mariadb.sql", sqllock.MariaDB},
		{"mysql.sql", sqllock.MySQL},
		{"sqlite.sql", sqllock.SQLite},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			st, err := storeFor(c.d)
			if err != nil {
				t.Fatal(err)
			}
			versions, err := st.quote(DefaultTable)
			if err != nil {
				t.Fatal(err)
			}
			counter, err := st.quote("sqllock_counters")
			if err != nil {
				t.Fatal(err)
			}
			var stmts []golden.Statement
			for _, s := range golden.Fields(st.versions(versions)) {
				stmts = append(stmts, golden.Statement{Name: "Versions" + s.Name, SQL: s.SQL})
			}
			for _, s := range golden.Fields(st.counter(counter)) {
				stmts = append(stmts, golden.Statement{Name: "Counter" + s.Name, SQL: s.SQL})
			}
			stmts = append(stmts, golden.Statement{Name: "CounterSchema", SQL: st.counterSchema(counter)})

			// A Table's statements name the caller's columns: shown for
			// the demo's stock table, an update of two columns.
			tbl, err := NewTable(c.d, "sqllock_demo_stock", "item", "version")
			if err != nil {
				t.Fatal(err)
			}
			update, err := tbl.updateQuery([]string{"units", "note"})
			if err != nil {
				t.Fatal(err)
			}
			stmts = append(stmts, golden.Statement{Name: "TableUpdate", SQL: update})
			golden.Check(t, c.file, golden.Render(stmts))
		})
	}
}
