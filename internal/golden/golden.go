// Package golden keeps the rendered statements of the stores in golden
// files under each package's testdata/, so that a change to SQL is
// reviewed as a diff of SQL. Tests only.
//
// Importing it defines the -update flag, which rewrites the files instead
// of comparing them. Every test package of the module imports it (a guard
// test checks), so that go test ./... -update runs everywhere: a test
// binary without the flag would fail with "flag provided but not defined".
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ instead of comparing them")

// Statement is one statement's text under its name.
type Statement struct {
	Name string
	SQL  string
}

// Render lays statements out as a golden file: each under a
// "-- name: <Name>" line, separated by a blank line.
func Render(stmts []Statement) string {
	var b strings.Builder
	for i, s := range stmts {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("-- name: " + s.Name + "\n")
		b.WriteString(strings.TrimRight(s.SQL, "\n") + "\n")
	}
	return b.String()
}

// Check compares got with testdata/file and fails t with a line diff when
// they differ; with -update it writes got there instead.
func Check(t testing.TB, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from the statements rendered now (- file, + now; go test -update rewrites it):\n%s",
			path, Diff(string(want), got))
	}
}

// Fields returns the statement texts among the string fields reachable
// from v (through pointers, embedded and named struct fields, slices and
// maps), in declaration order, each named by its field path in CamelCase:
// q.takeFree is TakeFree, gates.wait is GatesWait. Embedded fields and a
// field named q (a store's struct of queries) add nothing to the name.
// Empty strings (a statement the mode does not use) and strings without a
// space (a table or channel name, not a statement) are left out.
func Fields(v any) []Statement {
	var out []Statement
	seen := map[uintptr]bool{}
	var walk func(r reflect.Value, name string)
	walk = func(r reflect.Value, name string) {
		switch r.Kind() {
		case reflect.String:
			if s := r.String(); strings.ContainsAny(s, " \n\t") {
				out = append(out, Statement{Name: name, SQL: s})
			}
		case reflect.Pointer:
			if r.IsNil() || seen[r.Pointer()] {
				return
			}
			seen[r.Pointer()] = true
			walk(r.Elem(), name)
		case reflect.Interface:
			if !r.IsNil() {
				walk(r.Elem(), name)
			}
		case reflect.Struct:
			for i := range r.NumField() {
				f := r.Type().Field(i)
				n := name
				if !f.Anonymous && f.Name != "q" {
					n += camel(f.Name)
				}
				walk(r.Field(i), n)
			}
		case reflect.Slice, reflect.Array:
			for i := range r.Len() {
				walk(r.Index(i), name+strconv.Itoa(i))
			}
		case reflect.Map:
			keys := r.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				walk(r.MapIndex(k), name+camel(k.String()))
			}
		}
	}
	walk(reflect.ValueOf(v), "")
	return out
}

// camel is s with its first letter upper case.
func camel(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// Diff is a line diff of want and got: unchanged lines start with two
// spaces, lines only in want with "- ", lines only in got with "+ ".
// Runs of unchanged lines longer than six are cut to their ends.
func Diff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var lines []string
	var same []string
	flush := func() {
		if len(same) > 6 {
			same = append(append(same[:3:3], "  ..."), same[len(same)-3:]...)
		}
		lines = append(lines, same...)
		same = nil
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			same = append(same, "  "+a[i])
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] > lcs[i+1][j]):
			flush()
			lines = append(lines, "+ "+b[j])
			j++
		default:
			flush()
			lines = append(lines, "- "+a[i])
			i++
		}
	}
	flush()
	return strings.Join(lines, "\n")
}
