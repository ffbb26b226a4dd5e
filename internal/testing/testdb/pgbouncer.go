package testdb

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/sqllock/sqllock"
)

// EnvPgBouncer names a PgBouncer in transaction mode in front of the
// database of EnvPostgres, with default_query_exec_mode=exec in the DSN
// (.ci/pgbouncer env prints it).
const EnvPgBouncer = "SQLLOCK_PGBOUNCER_DSN"

// PgBouncer returns a handle through the PgBouncer of EnvPgBouncer, closed
// when the test ends, after migrating the database behind it directly
// (Open). Unset, it skips loudly, or fails the test with CI=true.
func PgBouncer(t testing.TB) *DB {
	t.Helper()
	direct := Open(t, sqllock.Postgres)
	dsn := os.Getenv(EnvPgBouncer)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdb: %s unset and CI=true: start one with .ci/pgbouncer up and eval \"$(.ci/pgbouncer env)\"", EnvPgBouncer)
		}
		t.Skipf("SKIPPING PGBOUNCER TESTS: %s unset (.ci/pgbouncer up; eval \"$(.ci/pgbouncer env)\")", EnvPgBouncer)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := waitPing(ctx, db); err != nil {
		t.Fatalf("testdb: PgBouncer at %s: %v", redact(dsn), err)
	}
	var name string
	if err := db.QueryRowContext(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	var want string
	if err := direct.QueryRowContext(ctx, "SELECT current_database()").Scan(&want); err != nil {
		t.Fatal(err)
	}
	if name != want {
		t.Fatalf("testdb: %s reaches database %q, %s database %q: point both at one", EnvPgBouncer, name, EnvPostgres, want)
	}
	return &DB{DB: db, Dialect: sqllock.Postgres, Driver: "pgx", DSN: dsn}
}
