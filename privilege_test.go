package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/tablelock"
)

// envBare names, per dialect, a DSN of a role that may connect to the
// migrated database but holds none of the application role's grants.
// .ci/step-roles sets them, and runs the tests as the application role.
var envBare = map[sqllock.Dialect]string{
	sqllock.Postgres: "SQLLOCK_BARE_POSTGRES_DSN",
	sqllock.MySQL:    "SQLLOCK_BARE_MYSQL_DSN",
}

// TestLeastPrivilege, run as the application role of the README's "Roles
// and grants": the role is no superuser and cannot signal other backends
// (PostgreSQL) and has no SUPER or PROCESS (MariaDB), yet takes and
// releases a lock; a role without the grants cannot write a lock row or
// draw a token, gets the server's permission error, and writes nothing.
func TestLeastPrivilege(t *testing.T) {
	for _, d := range []sqllock.Dialect{sqllock.Postgres, sqllock.MySQL} {
		t.Run(d.String(), func(t *testing.T) {
			bareDSN := os.Getenv(envBare[d])
			if bareDSN == "" {
				t.Skipf("%s is not set: .ci/step-roles runs this test as a role of its own", envBare[d])
			}
			ctx := context.Background()
			app := testdb.Open(t, d)
			checkUnprivileged(t, app)

			key := locktest.Key(t)
			l, err := tablelock.New(app.DB, d)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			lease, err := l.TryAcquire(ctx, key)
			if err != nil {
				t.Fatalf("the application role cannot lock: %v", err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}

			bare, err := sql.Open(app.Driver, bareDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer bare.Close()
			bl, err := tablelock.New(bare, d)
			if err != nil {
				t.Fatal(err)
			}
			defer bl.Close()
			denied := key + "-denied"
			_, err = bl.TryAcquire(ctx, denied)
			if !permissionDenied(err) || errors.Is(err, sqllock.ErrNotAcquired) || !strings.Contains(err.Error(), denied) {
				t.Fatalf("TryAcquire without the grants: %v; want the server's permission error, naming the key", err)
			}
			t.Logf("lock row without the grants: %v", err)
			var n int
			q := map[sqllock.Dialect]string{
				sqllock.Postgres: `SELECT count(*) FROM sqllock_locks WHERE lock_key = $1`,
				sqllock.MySQL:    `SELECT count(*) FROM sqllock_locks WHERE lock_key = ?`,
			}[d]
			if err := app.QueryRowContext(ctx, q, denied).Scan(&n); err != nil || n != 0 {
				t.Fatalf("rows for the refused key: %d, %v; want none", n, err)
			}

			draws := map[sqllock.Dialect][]string{
				sqllock.Postgres: {`SELECT sqllock_next_token()`, `SELECT nextval('sqllock_fence_seq')`},
				sqllock.MySQL:    {`SELECT NEXTVAL(sqllock_fence_seq)`},
			}[d]
			for _, q := range draws {
				var tok int64
				err := bare.QueryRowContext(ctx, q).Scan(&tok)
				if !permissionDenied(err) {
					t.Fatalf("%s without the grants: %d, %v; want the server's permission error", q, tok, err)
				}
				t.Logf("%s without the grants: %v", q, err)
			}
		})
	}
}

// checkUnprivileged fails the test unless db's role is as small as the
// README says the application role may be.
func checkUnprivileged(t *testing.T, db *testdb.DB) {
	t.Helper()
	ctx := context.Background()
	switch db.Dialect {
	case sqllock.Postgres:
		var super, signal, create bool
		err := db.QueryRowContext(ctx, `SELECT rolsuper, pg_has_role(current_user, 'pg_signal_backend', 'USAGE'),
			has_schema_privilege(current_user, current_schema(), 'CREATE')
			FROM pg_roles WHERE rolname = current_user`).Scan(&super, &signal, &create)
		if err != nil {
			t.Fatal(err)
		}
		if super || signal || create {
			t.Fatalf("the application role has superuser %v, pg_signal_backend %v, CREATE on its schema %v: want none", super, signal, create)
		}
	case sqllock.MySQL:
		rows, err := db.QueryContext(ctx, `SHOW GRANTS FOR CURRENT_USER()`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"ALL PRIVILEGES", "SUPER", "PROCESS", "CREATE", "CONNECTION ADMIN"} {
				if strings.Contains(strings.ToUpper(g), p) {
					t.Fatalf("the application user holds %s: %s", p, g)
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// permissionDenied: PostgreSQL's insufficient_privilege (42501) and
// MariaDB's "command denied to user ... for table" (1142); not an error at
// connection time, which would show nothing about the grants.
func permissionDenied(err error) bool {
	if err == nil {
		return false
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) && pg.SQLState() == "42501" {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "Error 1142")
}
