package locktable

import (
	"embed"
	"strings"
)

// The lock table's statements, one file per statement and variant, under
// sql/<dialect>: <statement>.sql, and <statement>.<variant>.sql where a
// variant's text differs. Each names the default table, sqllock_locks,
// quoted as its dialect quotes it, and that name (with the names derived
// from it) is the one part substituted; comment lines are for the reader
// and are not sent. Read them there, or rendered per dialect and mode in
// testdata/.
//
//go:embed sql/*/*.sql
var sqlFiles embed.FS

// statementFiles reads one table's statements from the files of one
// dialect.
type statementFiles struct {
	dir   string            // under sql/
	names *strings.Replacer // the default table's names to the table's
}

// text is the text of statement name in the first of variants that has a
// file of it ("" the plain <name>.sql, and the only one where none is
// given). It panics on a statement without a file: the golden tests
// render every statement of every store and mode.
func (f statementFiles) text(name string, variants ...string) string {
	if len(variants) == 0 {
		variants = []string{""}
	}
	for _, v := range variants {
		file := "sql/" + f.dir + "/" + name + ".sql"
		if v != "" {
			file = "sql/" + f.dir + "/" + name + "." + v + ".sql"
		}
		if b, err := sqlFiles.ReadFile(file); err == nil {
			return f.names.Replace(uncommented(string(b)))
		}
	}
	panic("locktable: no statement " + name + " in sql/" + f.dir + " for variants " + strings.Join(variants, ", "))
}

// read sets each of texts to the text of the statement it is keyed by.
func (f statementFiles) read(texts map[string]*string, variants ...string) {
	for name, p := range texts {
		*p = f.text(name, variants...)
	}
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

// How the files name the lock table: PostgreSQL's quoted, the others'
// backquoted.
const (
	postgresTable   = `"sqllock_locks"`
	backquotedTable = "`sqllock_locks`"
)

// postgresVariants lists, per variant, where its statements are looked
// for, most specific first: a statement with no file of its own in a
// variant is the same text as in the next one that has one. fair-async
// looks at notify-async before fair: fair's release sends a grant's
// calls after its flushed commit, and without flushed commits the
// announced release may notify a grant in its own commit.
var postgresVariants = map[string][]string{
	"":             {""},
	"async":        {"async", ""},
	"notify":       {"notify", ""},
	"notify-async": {"notify-async", "notify", "async", ""},
	"fair":         {"fair", "notify", ""},
	"fair-async":   {"fair-async", "notify-async", "fair", "notify", "async", ""},
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

// postgresStatement is the text of statement name in variant v, on table
// (quoted).
func postgresStatement(name, v, table string) string {
	f := statementFiles{dir: "postgres", names: strings.NewReplacer(postgresTable, table)}
	return f.text(name, postgresVariants[v]...)
}
