package golden

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const self = "github.com/sqllock/sqllock/internal/golden"

// TestEveryTestPackageDefinesUpdate: go test ./... -update passes -update
// to every test binary, and one whose package does not import this one
// fails with "flag provided but not defined".
func TestEveryTestPackageDefinesUpdate(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	tests := map[string]bool{} // directory -> a test file imports golden
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if d.IsDir() && path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		if d.IsDir() || !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		tests[dir] = tests[dir] || false
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == self {
				tests[dir] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 10 {
		t.Fatalf("found only %d test packages under %s", len(tests), root)
	}
	for dir, ok := range tests {
		rel, _ := filepath.Rel(root, dir)
		if !ok && rel != filepath.Join("internal", "golden") {
			t.Errorf("./%s: no test file imports %s, so go test ./... -update fails there", rel, self)
		}
	}
}

func TestDiff(t *testing.T) {
	got := Diff("a\nb\nc", "a\nx\nc")
	want := "  a\n- b\n+ x\n  c"
	if got != want {
		t.Errorf("Diff =\n%s\nwant\n%s", got, want)
	}
}

func TestFields(t *testing.T) {
	type gates struct{ wait, name string }
	type inner struct{ holder string }
	v := &struct {
		inner
		q     struct{ take, takeFree string }
		gates gates
		list  []string
	}{
		inner: inner{holder: "SELECT 1"},
		gates: gates{wait: "SELECT GET_LOCK(?, ?)", name: "sqllock_locks"},
		list:  []string{"SELECT 2"},
	}
	v.q.take = "INSERT INTO t"
	got := Render(Fields(v))
	want := "-- name: Holder\nSELECT 1\n\n-- name: Take\nINSERT INTO t\n\n-- name: GatesWait\nSELECT GET_LOCK(?, ?)\n\n-- name: List0\nSELECT 2\n"
	if got != want {
		t.Errorf("Render(Fields(v)) =\n%s\nwant\n%s", got, want)
	}
}
