package sqllock_test

import (
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqllock/sqllock/migrations"
)

// readmeGrants returns the "Roles and grants" section of docs/operations.md
// (the README links it): its text and the GRANT statements of its sql
// blocks.
func readmeGrants(t *testing.T) (string, []string) {
	t.Helper()
	b, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Roles and grants\n")
	if i < 0 {
		t.Fatal(`docs/operations.md has no "## Roles and grants" section`)
	}
	s = s[i+1:]
	if j := regexp.MustCompile(`\n##+ `).FindStringIndex(s[1:]); j != nil {
		s = s[:j[0]+1]
	}
	var sql strings.Builder
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(s, -1) {
		sql.WriteString(m[1])
	}
	return s, grantStatements(sql.String())
}

// grantStatements returns the GRANT statements of sql, comments dropped
// and spaces collapsed.
func grantStatements(sql string) []string {
	sql = regexp.MustCompile(`--[^\n]*`).ReplaceAllString(sql, "")
	var out []string
	for _, st := range strings.Split(sql, ";") {
		st = strings.Join(strings.Fields(st), " ")
		if strings.HasPrefix(st, "GRANT ") {
			out = append(out, st)
		}
	}
	return out
}

// TestGrantsMatchStep keeps the grants of docs/operations.md and .ci/step-roles, which
// runs the tests as the application role with them, in step: the step's
// grants to the application role, with the page's names for role and
// database, are the page's, statement for statement. And every table,
// sequence and function the migrations leave behind is named in the
// section, granted or said to need no grant.
func TestGrantsMatchStep(t *testing.T) {
	text, readme := readmeGrants(t)
	if len(readme) == 0 {
		t.Fatal("the Roles and grants section of docs/operations.md has no GRANT statements in sql blocks")
	}
	b, err := os.ReadFile(".ci/step-roles")
	if err != nil {
		t.Fatal(err)
	}
	var sql strings.Builder
	for _, m := range regexp.MustCompile(`(?s)<<SQL\n(.*?)\nSQL\n`).FindAllStringSubmatch(string(b), -1) {
		sql.WriteString(m[1] + ";\n")
	}
	names := strings.NewReplacer(
		"'$app'@'127.0.0.1'", "'app_user'@'%'",
		"DATABASE $db", "DATABASE app",
		"$d.", "app.",
		"$app", "app_role",
	)
	var step []string
	for _, st := range grantStatements(names.Replace(sql.String())) {
		_, to, _ := strings.Cut(st, " TO ")
		if (to == "app_role" || to == "'app_user'@'%'") && !slices.Contains(step, st) {
			step = append(step, st)
		}
	}
	if len(step) == 0 {
		t.Fatal(".ci/step-roles grants the application role nothing")
	}
	for _, st := range step {
		if !slices.Contains(readme, st) {
			t.Errorf(".ci/step-roles grants what docs/operations.md does not:\n\t%s;", st)
		}
	}
	for _, st := range readme {
		if !slices.Contains(step, st) {
			t.Errorf("docs/operations.md grants what .ci/step-roles does not (so no test runs with it):\n\t%s;", st)
		}
	}

	create := regexp.MustCompile(`(?i)\b(CREATE|DROP)\s+(?:OR\s+REPLACE\s+)?(?:TABLE|SEQUENCE|FUNCTION|PROCEDURE)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(\w+)`)
	for _, dir := range []string{"postgres", "mysql"} {
		files, err := fs.Glob(migrations.FS, dir+"/*.sql")
		if err != nil {
			t.Fatal(err)
		}
		left := map[string]string{} // object -> the migration that made it
		for _, f := range files {
			b, err := fs.ReadFile(migrations.FS, f)
			if err != nil {
				t.Fatal(err)
			}
			up, _, _ := strings.Cut(string(b), "-- +goose Down")
			up = regexp.MustCompile(`--[^\n]*`).ReplaceAllString(up, "")
			for _, m := range create.FindAllStringSubmatch(up, -1) {
				if strings.EqualFold(m[1], "CREATE") {
					left[m[2]] = f
				} else {
					delete(left, m[2])
				}
			}
		}
		for _, obj := range slices.Sorted(maps.Keys(left)) {
			if !strings.Contains(text, obj) {
				t.Errorf("%s creates %s, which the Roles and grants of docs/operations.md does not name", left[obj], obj)
			}
		}
	}
}
