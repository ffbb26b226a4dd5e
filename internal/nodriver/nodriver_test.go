package nodriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	// Every library package: importing them must register no driver.
	_ "github.com/sqllock/sqllock"
	_ "github.com/sqllock/sqllock/advisory"
	_ "github.com/sqllock/sqllock/fence"
	_ "github.com/sqllock/sqllock/jobguard"
	_ "github.com/sqllock/sqllock/migrations"
	_ "github.com/sqllock/sqllock/optimistic"
	_ "github.com/sqllock/sqllock/pgxq"
	_ "github.com/sqllock/sqllock/reaper"
	_ "github.com/sqllock/sqllock/rowlock"
	_ "github.com/sqllock/sqllock/tablelock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// libraryPackages are the packages an application imports.
var libraryPackages = []string{".", "./advisory", "./fence", "./jobguard", "./migrations", "./optimistic", "./pgxq", "./reaper", "./rowlock", "./tablelock"}

// fake is an application's own driver.
type fake struct{}

func (fake) Open(string) (driver.Conn, error) { return nil, errors.New("fake driver") }

// An application that uses another pure-Go SQLite driver registers it as
// "sqlite" (as GORM's pure-Go driver does); one with its own MySQL or
// PostgreSQL wrapper may take those names too. With every library package
// imported, none of those names is taken yet.
func TestApplicationRegistersItsOwnDrivers(t *testing.T) {
	if got := sql.Drivers(); len(got) != 0 {
		t.Fatalf("importing the library registered database/sql drivers %q", got)
	}
	for _, name := range []string{"sqlite", "sqlite3", "mysql", "pgx", "postgres"} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("sql.Register(%q) panicked: %v", name, r)
				}
			}()
			sql.Register(name, fake{})
		}()
	}
	db, err := sql.Open("sqlite", "x")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(context.Background()); err == nil || !strings.Contains(err.Error(), "fake driver") {
		t.Fatalf("sql.Open(\"sqlite\") reached %v, want the application's own driver", err)
	}
}

// No library package links the SQLite driver (a PostgreSQL-only user must
// not carry the transpiled SQLite) nor the MySQL driver.
func TestLibraryLinksNoDriver(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	cmd := exec.Command(goTool, append([]string{"list", "-deps"}, libraryPackages...)...)
	cmd.Dir = "../.."
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
