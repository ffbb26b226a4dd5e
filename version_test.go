package sqllock_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// version parses the leading "major.minor" of a version string.
func version(s string) [2]int {
	m := regexp.MustCompile(`^(\d+)(?:\.(\d+))?`).FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return [2]int{-1, -1}
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return [2]int{major, minor}
}

func atLeast(v, floor [2]int) bool { return v[0] > floor[0] || v[0] == floor[0] && v[1] >= floor[1] }

// The version floors are stated once (Dialect.MinVersion). Each is at
// least the version that brought every feature the statements use, the
// servers the tests run on are at least that old, and the README quotes
// the same numbers.
func TestVersionFloors(t *testing.T) {
	features := map[sqllock.Dialect]map[string]string{
		sqllock.Postgres: {"pg_current_xact_id": "13", "ON CONFLICT": "9.5"},
		sqllock.MariaDB:  {"SEQUENCE": "10.3", "INSERT ... RETURNING": "10.5", "FOR UPDATE NOWAIT / WAIT n": "10.3", "SET STATEMENT": "10.1"},
		sqllock.MySQL:    {"FOR UPDATE NOWAIT": "8.0", "persistent AUTO_INCREMENT": "8.0"},
		sqllock.SQLite:   {"RETURNING": "3.35", "unixepoch('subsec')": "3.42", "ON CONFLICT DO UPDATE": "3.24"},
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[sqllock.Dialect]string{sqllock.Postgres: "PostgreSQL", sqllock.MariaDB: "MariaDB", sqllock.SQLite: "SQLite", sqllock.MySQL: "MySQL"}
	for _, d := range testdb.Dialects {
		t.Run(d.String(), func(t *testing.T) {
			floor := version(d.MinVersion())
			for f, since := range features[d] {
				if !atLeast(floor, version(since)) {
					t.Errorf("MinVersion %s is older than %s, which %s needs", d.MinVersion(), since, f)
				}
			}
			if want := names[d] + " " + d.MinVersion(); !strings.Contains(string(readme), want) {
				t.Errorf("README.md does not state the floor %q", want)
			}
			db := testdb.Open(t, d)
			q := map[sqllock.Dialect]string{
				sqllock.Postgres: "SHOW server_version",
				sqllock.MariaDB:  "SELECT VERSION()",
				sqllock.MySQL:    "SELECT VERSION()",
				sqllock.SQLite:   "SELECT sqlite_version()",
			}[d]
			var v string
			if err := db.QueryRowContext(context.Background(), q).Scan(&v); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s server %s, floor %s", d, v, d.MinVersion())
			if !atLeast(version(v), floor) {
				t.Errorf("the tests run on %s %s, older than the floor %s", d, v, d.MinVersion())
			}
		})
	}
	if sqllock.Dialect(9).MinVersion() != "" {
		t.Error("an unknown dialect has a floor")
	}
}
