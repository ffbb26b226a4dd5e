package locktable

import (
	"io/fs"
	"strings"
	"testing"
)

// TestEveryStatementFileSent: each file under sql/ is sent, in some
// dialect and mode, as the whole or a part of a statement, so that no
// file is left behind that a reader would take for what runs.
func TestEveryStatementFileSent(t *testing.T) {
	var rendered strings.Builder
	for _, m := range lockTableModes {
		rendered.WriteString(renderStore(t, m.d, m.cfg))
	}
	files, err := fs.Glob(sqlFiles, "sql/*/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("sql/*/*.sql: %v, %d files", err, len(files))
	}
	for _, file := range files {
		b, err := sqlFiles.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// The files name the default table, as the golden modes do.
		if text := uncommented(string(b)); !strings.Contains(rendered.String(), text) {
			t.Errorf("%s: no store sends its text in any mode of lockTableModes", file)
		}
	}
}
