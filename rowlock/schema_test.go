package rowlock_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// TestSchemaMatchesMigration keeps Schema and the shipped migration in step.
func TestSchemaMatchesMigration(t *testing.T) {
	for _, d := range servers {
		dir, err := migrations.Dir(d)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fs.ReadFile(migrations.FS, dir+"/00002_rowlock.sql")
		if err != nil {
			t.Fatal(err)
		}
		ddl, err := rowlock.Schema(d, rowlock.DefaultTable)
		if err != nil {
			t.Fatal(err)
		}
		ddl = strings.ReplaceAll(ddl, `"sqllock_rows"`, "sqllock_rows")
		ddl = strings.ReplaceAll(ddl, "`sqllock_rows`", "sqllock_rows")
		if !strings.Contains(string(b), ddl) {
			t.Errorf("%v: migration does not contain Schema's DDL:\n%s", d, ddl)
		}
	}
	if _, err := rowlock.Schema(sqllock.Postgres, "bad name"); err == nil {
		t.Error("Schema accepted an invalid table name")
	}
}
