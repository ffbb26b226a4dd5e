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

// readmeExample marks a code block of README.md that is the body of a
// runnable Example: <!-- example: path/example_test.go ExampleName -->
// followed by a ```go block.
var readmeExample = regexp.MustCompile("(?s)<!-- example: (\\S+) (\\w+) -->\n```go\n(.*?)```\n")

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
		file, name, body := string(readme[m[2]:m[3]]), string(readme[m[4]:m[5]]), string(readme[m[6]:m[7]])
		want, err := exampleBody(file, name)
		if err != nil {
			t.Fatalf("README block %s %s: %v", file, name, err)
		}
		if body != want && !*updateReadme {
			t.Errorf("README block of %s in %s differs from the Example; run go test -run TestReadmeExamples -update-readme .\n--- README\n%s--- Example\n%s", name, file, body, want)
		}
		out.Write(readme[last:m[6]])
		out.WriteString(want)
		last = m[7]
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
// gofmt would, one indent level removed, without its Output comment.
func exampleBody(file, name string) (string, error) {
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
