package nodriver

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// module is the module whose library packages are checked.
const module = "github.com/sqllock/sqllock"

// libraryPackages are the packages an application imports, as go list
// finds them in the module, so that a new package is checked without
// anyone adding it here: all but the command, the examples and the
// internal packages (an application cannot import those; the library's
// own are checked as the public packages' dependencies, and the test
// infrastructure, which links drivers on purpose, is not the library).
func libraryPackages(t *testing.T, goTool string) []string {
	t.Helper()
	cmd := exec.Command(goTool, "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = "../../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		top, _, _ := strings.Cut(rel, "/")
		if top == "cmd" || top == "examples" || top == "internal" || strings.Contains(rel, "/internal/") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	// The list is go list's: it must hold the packages a hand-kept one
	// once missed.
	for _, want := range []string{module, module + "/tablelock", module + "/election", module + "/semaphore", module + "/rwlock"} {
		if !slices.Contains(pkgs, want) {
			t.Fatalf("the library packages %q lack %s", pkgs, want)
		}
	}
	return pkgs
}

func goTool(t *testing.T) string {
	t.Helper()
	g, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list packages with")
	}
	return g
}

// An application that uses another pure-Go SQLite driver registers it as
// "sqlite" (as GORM's pure-Go driver does); one with its own MySQL or
// PostgreSQL wrapper may take those names too. A program that imports
// every library package finds none of those names taken: it registers its
// own driver under each, and sql.Open("sqlite") reaches it. The program is
// written to a temporary folder and run in the module.
func TestApplicationRegistersItsOwnDrivers(t *testing.T) {
	g := goTool(t)
	var imports strings.Builder
	for _, p := range libraryPackages(t, g) {
		imports.WriteString("\t_ " + `"` + p + `"` + "\n")
	}
	prog := filepath.Join(t.TempDir(), "main.go")
	if err := os.WriteFile(prog, []byte(strings.Replace(application, "\t// IMPORTS\n", imports.String(), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(g, "run", prog)
	cmd.Dir = "../../.."
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("an application importing every library package: %v\n%s", err, out)
	}
}

// application is the program TestApplicationRegistersItsOwnDrivers runs;
// the library's blank imports replace the IMPORTS line.
const application = `package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"strings"

	// IMPORTS
)

// fake is an application's own driver.
type fake struct{}

func (fake) Open(string) (driver.Conn, error) { return nil, errors.New("fake driver") }

func main() {
	if got := sql.Drivers(); len(got) != 0 {
		fmt.Printf("importing the library registered database/sql drivers %q\n", got)
		os.Exit(1)
	}
	for _, name := range []string{"sqlite", "sqlite3", "mysql", "pgx", "postgres"} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Printf("sql.Register(%q) panicked: %v\n", name, r)
					os.Exit(1)
				}
			}()
			sql.Register(name, fake{})
		}()
	}
	db, err := sql.Open("sqlite", "x")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer db.Close()
	if err := db.PingContext(context.Background()); err == nil || !strings.Contains(err.Error(), "fake driver") {
		fmt.Printf("sql.Open(\"sqlite\") reached %v, want the application's own driver\n", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}
`

// No library package links the SQLite driver (a PostgreSQL-only user must
// not carry the transpiled SQLite) nor the MySQL driver.
func TestLibraryLinksNoDriver(t *testing.T) {
	g := goTool(t)
	cmd := exec.Command(g, append([]string{"list", "-deps"}, libraryPackages(t, g)...)...)
	cmd.Dir = "../../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, drv := range []string{"modernc.org/sqlite", "github.com/go-sql-driver/mysql", "github.com/jackc/pgx/v5/stdlib", "github.com/lib/pq"} {
		if slices.Contains(deps, drv) {
			t.Errorf("a library package depends on the driver %s", drv)
		}
	}
}
