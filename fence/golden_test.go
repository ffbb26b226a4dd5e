package fence

import (
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/golden"
)

// TestGoldenStatements: every statement of the fence table, per dialect, as
// testdata/ holds it; go test -update rewrites the files.
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
			st, err := storeFor(c.d, DefaultTable)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, c.file, golden.Render(golden.Fields(st)))
		})
	}
}
