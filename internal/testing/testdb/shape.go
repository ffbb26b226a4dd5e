package testdb

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
)

// Shape describes table as the database holds it, with the table's name
// replaced by "T": its columns (type, nullability, default, collation) and
// its indexes. Two tables of one shape behave alike, whichever DDL or
// migrations made them; a test compares a table made from a Schema function
// with the one the migrations left.
func Shape(t testing.TB, db *DB, table string) string {
	t.Helper()
	var lines []string
	add := func(q string, args ...any) {
		t.Helper()
		rows, err := db.Query(q, args...)
		if err != nil {
			t.Fatalf("shape of %s: %v", table, err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				parts[i] = fmt.Sprint(v)
			}
			lines = append(lines, strings.ReplaceAll(strings.Join(parts, " | "), table, "T"))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	switch db.Dialect {
	case sqllock.Postgres:
		// By name, not position: PostgreSQL adds a column last and cannot
		// move it, so a table a migration widened in place lists its
		// columns in another order than one created whole. Statements name
		// their columns; the order changes nothing.
		add(`SELECT column_name, data_type, character_maximum_length, is_nullable, column_default, collation_name
FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY column_name`, table)
		n := len(lines)
		add(`SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1`, table)
		slices.Sort(lines[n:])
		// Storage parameters such as fillfactor, which decide whether
		// updates can be HOT.
		add(`SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class WHERE oid = to_regclass(quote_ident($1))`, table)
	case sqllock.MariaDB, sqllock.MySQL:
		// SHOW CREATE TABLE spells out every column, index, charset and
		// collation in one canonical form.
		var name, ddl string
		if err := db.QueryRow("SHOW CREATE TABLE `"+table+"`").Scan(&name, &ddl); err != nil {
			t.Fatalf("shape of %s: %v", table, err)
		}
		lines = append(lines, strings.Split(strings.ReplaceAll(ddl, table, "T"), "\n")...)
	case sqllock.SQLite:
		add(`SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid`, table)
		n := len(lines)
		add(`SELECT il.name, il."unique", il.origin, ii.seqno, ii.name
FROM pragma_index_list(?) AS il, pragma_index_info(il.name) AS ii`, table)
		slices.Sort(lines[n:])
	default:
		t.Fatalf("shape: unknown dialect %v", db.Dialect)
	}
	if len(lines) == 0 {
		t.Fatalf("shape: no table %s", table)
	}
	return strings.Join(lines, "\n")
}
