package election

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/golden"
)

// nowhere is a connector that never connects: New does not touch the
// database, and the golden test only reads the statements it built.
type nowhere struct{}

func (nowhere) Connect(context.Context) (driver.Conn, error) { return nil, errors.New("no database") }
func (nowhere) Driver() driver.Driver                        { return nil }

// TestGoldenStatements: every statement of the term table, per dialect, as
// testdata/ holds it (the leases are tablelock's: see internal/locktable's
// golden files); go test -update rewrites the files.
func TestGoldenStatements(t *testing.T) {
	db := sql.OpenDB(nowhere{})
	defer db.Close()
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
			e, err := New(db, c.d)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			golden.Check(t, c.file, golden.Render(golden.Fields(e.q)))
		})
	}
}
