package sqllock_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's example blocks from the Examples")

// readmeExample marks a code block of README.md that comes from the code
// the test suite runs, followed by a ```go block:
//
//	<!-- example: path/example_test.go ExampleName -->  the body of a function (an Example's)
//	<!-- code: path/file.go name -->                    a whole function, its doc comment included
var readmeExample = regexp.MustCompile("(?s)<!-- (example|code): (\\S+) (\\w+) -->\n```go\n(.*?)```\n")

// TestReadmeExamples keeps the README's code the code of Examples the test
// suite runs, so it cannot drift from what compiles and works. Run
// `go test -run TestReadmeExamples -update-readme .` after changing an
// Example.
func TestReadmeExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	matches := readmeExample.FindAllSubmatchIndex(readme, -1)
	if len(matches) == 0 {
		t.Fatal("README.md has no example blocks")
	}
	var out bytes.Buffer
	last := 0
	for _, m := range matches {
		kind, file, name, body := string(readme[m[2]:m[3]]), string(readme[m[4]:m[5]]), string(readme[m[6]:m[7]]), string(readme[m[8]:m[9]])
		want, err := exampleBody(file, name, kind == "code")
		if err != nil {
			t.Fatalf("README block %s %s: %v", file, name, err)
		}
		if body != want && !*updateReadme {
			t.Errorf("README block of %s in %s differs from the Example; run go test -run TestReadmeExamples -update-readme .\n--- README\n%s--- Example\n%s", name, file, body, want)
		}
		out.Write(readme[last:m[8]])
		out.WriteString(want)
		last = m[9]
	}
	out.Write(readme[last:])
	if *updateReadme && !bytes.Equal(out.Bytes(), readme) {
		if err := os.WriteFile("README.md", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("README.md rewritten from the Examples")
	}
}

// exampleBody returns the statements of function name in file, printed as
// gofmt would, one indent level removed, without its Output comment; with
// whole, the function itself with its doc comment.
func exampleBody(file, name string, whole bool) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		return "", err
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			fn = fd
		}
	}
	if fn == nil {
		return "", fmt.Errorf("no function %s", name)
	}
	var buf bytes.Buffer
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	if whole {
		for _, l := range strings.Split(strings.TrimSuffix(fn.Doc.Text(), "\n"), "\n") {
			buf.WriteString(strings.TrimRight("// "+l, " ") + "\n")
		}
		doc := fn.Doc
		fn.Doc = nil // printed above
		err := cfg.Fprint(&buf, fset, &printer.CommentedNode{Node: fn, Comments: f.Comments})
		fn.Doc = doc
		return buf.String() + "\n", err
	}
	if err := cfg.Fprint(&buf, fset, &printer.CommentedNode{Node: fn.Body, Comments: f.Comments}); err != nil {
		return "", err
	}
	lines := strings.Split(buf.String(), "\n")
	lines = lines[1 : len(lines)-1] // the braces
	var b strings.Builder
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "// Output:") || strings.HasPrefix(trimmed, "// Unordered output:") {
			break
		}
		b.WriteString(strings.TrimPrefix(l, "\t") + "\n")
	}
	return b.String(), nil
}
