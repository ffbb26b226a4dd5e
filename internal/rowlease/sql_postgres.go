package rowlease

import (
	"embed"
	"strings"
)

// The PostgreSQL statements, one file per statement and variant, under
// sql/postgres: <statement>.sql, and <statement>.<variant>.sql where a
// variant's text differs. Each names the lock table as "sqllock_locks",
// the one part substituted (postgresStatement); comment lines are for the
// reader and are not sent. Read them there, or rendered per mode in
// testdata/postgres*.sql.
//
//go:embed sql/postgres/*.sql
var postgresSQL embed.FS

// postgresTable is how the statement files name the lock table.
const postgresTable = `"sqllock_locks"`

// postgresVariants lists, per variant, where its statements are looked
// for, most specific first: a statement with no file of its own in a
// variant is the same text as in the next one that has one.
var postgresVariants = map[string][]string{
	"":             {""},
	"async":        {"async", ""},
	"notify":       {"notify", ""},
	"notify-async": {"notify-async", "notify", "async", ""},
	"fair":         {"fair", "notify", ""},
	"fair-async":   {"fair-async", "fair", "notify-async", "notify", "async", ""},
}

// postgresVariant names the statement variant cfg runs: announced
// releases (notify), grants to queued entries (fair, which needs notify),
// commits that do not wait for the WAL flush (async).
func postgresVariant(cfg Config) string {
	var v []string
	switch {
	case cfg.Notify && cfg.Fair:
		v = append(v, "fair")
	case cfg.Notify:
		v = append(v, "notify")
	}
	if cfg.AsyncCommit {
		v = append(v, "async")
	}
	return strings.Join(v, "-")
}

// uncommented is a statement file's text without its comment lines (the
// reader's, not the server's) and final newline.
func uncommented(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// postgresStatement is the text of statement name in variant v, on table
// (quoted). It panics on a statement without a file: the golden tests
// render every statement of every variant.
func postgresStatement(name, v, table string) string {
	for _, f := range postgresVariants[v] {
		file := "sql/postgres/" + name + ".sql"
		if f != "" {
			file = "sql/postgres/" + name + "." + f + ".sql"
		}
		b, err := postgresSQL.ReadFile(file)
		if err == nil {
			return strings.ReplaceAll(uncommented(string(b)), postgresTable, table)
		}
	}
	panic("rowlease: no statement " + name + " for PostgreSQL " + v)
}
