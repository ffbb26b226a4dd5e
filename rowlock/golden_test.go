package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/golden"
)

// preparedNames name the statements of a store's prepared list, by index.
var preparedNames = map[sqllock.Dialect][]string{
	sqllock.Postgres: {"Lock", "Stamp", "TryLock", "TryInsert", "StampRestore", "Share", "TryShare", "ShareInsert"},
	sqllock.MariaDB:  {"LockNoWait", "LockWait", "ShareNoWait", "ShareWait"},
	sqllock.MySQL:    {"LockNoWait", "LockWait", "ShareNoWait", "ShareWait"},
}

// lockRowsQuery is the statement LockRows runs for keys, as its
// recorder saw it.
func lockRowsQuery(t *testing.T, d sqllock.Dialect, keys ...string) string {
	t.Helper()
	r := &recordingQuerier{}
	if _, err := LockRows(context.Background(), r, d, "orders", "id", keys...); err == nil {
		t.Fatal("LockRows ran on a recorder")
	}
	return r.query
}

// TestGoldenStatements: every statement of the row lock store, per
// dialect, and LockRows' statement for three keys, as testdata/ holds
// them; go test -update rewrites the files.
func TestGoldenStatements(t *testing.T) {
	for _, c := range []struct {
		file string
		d    sqllock.Dialect
	}{
		{"postgres.sql", sqllock.Postgres},
		{"mariadb.sql", sqllock.MariaDB},
		{"mysql.sql", sqllock.MySQL},
	} {
		t.Run(c.d.String(), func(t *testing.T) {
			dl, err := dialectOf(c.d, "")
			if err != nil {
				t.Fatal(err)
			}
			tbl, err := dl.quote(DefaultTable)
			if err != nil {
				t.Fatal(err)
			}
			stmts := []golden.Statement{
				{Name: "Schema", SQL: dl.schema(tbl)},
				{Name: "Token", SQL: dl.tokenQuery()},
			}
			names := preparedNames[c.d]
			for _, s := range golden.Fields(dl.newStore(tbl, storeEnv{})) {
				if i, ok := strings.CutPrefix(s.Name, "Prepared"); ok {
					for n, name := range names {
						if i == strconv.Itoa(n) {
							s.Name = name
						}
					}
				}
				stmts = append(stmts, s)
			}
			stmts = append(stmts, golden.Statement{Name: "LockRows", SQL: lockRowsQuery(t, c.d, "b", "a", "c", "a")})
			golden.Check(t, c.file, golden.Render(stmts))
		})
	}
}

// recordingQuerier keeps the statement it is given and runs nothing.
type recordingQuerier struct{ query string }

var errRecorded = errors.New("recorded, not run")

func (r *recordingQuerier) ExecContext(_ context.Context, q string, _ ...any) (sql.Result, error) {
	r.query = q
	return nil, errRecorded
}

func (r *recordingQuerier) QueryContext(_ context.Context, q string, _ ...any) (*sql.Rows, error) {
	r.query = q
	return nil, errRecorded
}
