package sqllock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsCode keeps the code blocks of docs/ pages marked as the
// README's are the code the test suite runs; -update-readme rewrites them.
func TestDocsCode(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs/*.md: %v, %d pages", err, len(pages))
	}
	for _, page := range pages {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		last := 0
		for _, m := range readmeExample.FindAllSubmatchIndex(doc, -1) {
			kind, file, name, body := string(doc[m[2]:m[3]]), string(doc[m[4]:m[5]]), string(doc[m[6]:m[7]]), string(doc[m[8]:m[9]])
			want, err := exampleBody(file, name, kind == "code")
			if err != nil {
				t.Fatalf("%s: block %s %s: %v", page, file, name, err)
			}
			if body != want && !*updateReadme {
				t.Errorf("%s: the block of %s in %s differs from the code; run go test -run TestDocsCode -update-readme .\n--- %s\n%s--- code\n%s", page, name, file, page, body, want)
			}
			out.Write(doc[last:m[8]])
			out.WriteString(want)
			last = m[9]
		}
		out.Write(doc[last:])
		if *updateReadme && out.String() != string(doc) {
			if err := os.WriteFile(page, []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s rewritten from the code", page)
		}
	}
}

// TestEveryPackageHasAnExample: each package an application imports has
// a runnable Example in its go doc.
func TestEveryPackageHasAnExample(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, " ")
		if strings.Contains(path, "/internal/") || strings.Contains(path, "/cmd/") || strings.Contains(path, "/examples/") {
			continue
		}
		n++
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "\nfunc Example") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s has no Example", path)
		}
	}
	if n < 10 {
		t.Fatalf("go list found %d library packages, want the module's", n)
	}
}
