package sqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/advisory"
	"github.com/sqllock/sqllock/internal/testing/locktest"
	"github.com/sqllock/sqllock/internal/testing/testdb"
	"github.com/sqllock/sqllock/jobguard"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/optimistic"
	"github.com/sqllock/sqllock/rowlock"
	"github.com/sqllock/sqllock/tablelock"
)

// The flavour is read from the server, not the driver: MariaDB keeps its
// own path unless MySQL is asked for.
func TestDetectServerMariaDB(t *testing.T) {
	db := testdb.Open(t, testdb.MySQL())
	ctx := context.Background()
	srv, err := sqllock.DetectServer(ctx, db.DB)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %q (%q), galera %v, cluster size %d", srv.Version, srv.Comment, srv.Galera, srv.ClusterSize)
	if !srv.MariaDB || srv.Dialect() != sqllock.MariaDB || srv.MultiWriter() {
		t.Fatalf("DetectServer = %+v on the test MariaDB; want MariaDB, dialect MariaDB, one writer", srv)
	}
	for in, want := range map[sqllock.Dialect]sqllock.Dialect{
		sqllock.MariaDB: sqllock.MariaDB, sqllock.MySQL: sqllock.MySQL,
	} {
		if got, err := sqllock.ServerDialect(ctx, db.DB, in); err != nil || got != want {
			t.Errorf("ServerDialect(%v) = %v, %v; want %v", in, got, err, want)
		}
	}
	if (sqllock.Server{Version: "8.4.3", Comment: "MySQL Community Server - GPL"}).Dialect() != sqllock.MySQL {
		t.Error("a MySQL server does not get the MySQL path")
	}
}

// TestMySQL8 runs against a real MySQL 8 when SQLLOCK_MYSQL8_DSN names
// one. No MySQL 8 can be installed on the CI machines, so there it skips,
// loudly; the full suite on MySQL 8 is .ci/step-mysql-common.
func TestMySQL8(t *testing.T) {
	dsn := os.Getenv(testdb.EnvMySQL8)
	if dsn == "" {
		t.Skip("NOT RUN: SQLLOCK_MYSQL8_DSN is unset, so nothing ran against a real MySQL 8 " +
			"(none can be installed here); the MySQL path was tested on MariaDB only (SQLLOCK_MYSQL_COMMON=1)")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := sqllock.DetectServer(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %q (%q)", srv.Version, srv.Comment)
	d, err := sqllock.ServerDialect(ctx, db, sqllock.MariaDB)
	if err != nil || d != sqllock.MySQL || srv.MariaDB {
		t.Fatalf("ServerDialect on %s = %v, %v; want MySQL", srv.Version, d, err)
	}
	if err := migrations.Up(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	l, err := tablelock.New(db, d)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := locktest.Key(t)
	a, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, key+"/2")
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Errorf("tokens %d then %d: not increasing", a.Token(), b.Token())
	}
	_ = a.Release(ctx)
	_ = b.Release(ctx)
}

// A database without the migrations: the MySQL path says to run them, and
// writes nothing.
func TestCommonPathNeedsMigrations(t *testing.T) {
	db := testdb.Scratch(t, sqllock.MySQL)
	ctx := context.Background()
	l, err := tablelock.New(db.DB, sqllock.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.TryAcquire(ctx, "k")
	if err == nil || !strings.Contains(err.Error(), "migrations.Up") || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("TryAcquire on a database never migrated = %v; want an error naming the key and saying to run migrations.Up", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d tables after the refused acquire (%v); want none", n, err)
	}
}

// The MariaDB path raises the sequence through sqllock_next_token() before
// a handle's first token (the tickets may be ahead of it): a user without
// EXECUTE on the function is refused with an error naming the key and the
// grant, and writes nothing, rather than locking with a token that could
// go back. With the grant, the same handle locks: a failure is not kept.
func TestMariaDBPathNeedsTokenFunction(t *testing.T) {
	ctx := context.Background()
	db := testdb.Scratch(t, sqllock.MariaDB)
	if srv, err := sqllock.DetectServer(ctx, db.DB); err != nil || !srv.MariaDB || srv.Galera {
		t.Skipf("needs MariaDB outside Galera: %+v, %v", srv, err)
	}
	if err := migrations.Up(ctx, db.DB, sqllock.MariaDB); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	user := fmt.Sprintf("sqllock_noexec_%d", os.Getpid())
	if _, err := db.ExecContext(ctx, "CREATE USER '"+user+"'@'%'"); err != nil {
		t.Skipf("cannot create a user to lack the grant: %v", err)
	}
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP USER '"+user+"'@'%'"); err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
	for _, q := range []string{
		"GRANT SELECT, INSERT ON " + cfg.DBName + ".sqllock_fence_seq TO '" + user + "'@'%'",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON " + cfg.DBName + ".sqllock_locks TO '" + user + "'@'%'",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cfg.User, cfg.Passwd = user, ""
	app, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	l, err := tablelock.New(app, sqllock.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	key := locktest.Key(t)
	lease, err := l.TryAcquire(ctx, key)
	if err == nil {
		_ = lease.Release(ctx)
		t.Fatalf("TryAcquire without EXECUTE on sqllock_next_token took token %d; want a refusal", lease.Token())
	}
	for _, want := range []string{fmt.Sprintf("%q", key), "Error 1370", "GRANT EXECUTE ON FUNCTION sqllock_next_token"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("TryAcquire without EXECUTE = %v; want it to say %s", err, want)
		}
	}
	t.Logf("without EXECUTE: %v", err)
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqllock_locks").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d lock rows after the refusal (%v); want none", n, err)
	}

	if _, err := db.ExecContext(ctx, "GRANT EXECUTE ON FUNCTION "+cfg.DBName+".sqllock_next_token TO '"+user+"'@'%'"); err != nil {
		t.Fatal(err)
	}
	lease, err = l.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire with the grant: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Every strategy takes the single-writer option, and off a multi-writer
// Galera cluster it changes nothing: each locks and releases with it on
// PostgreSQL and on MariaDB. (The refusal it lifts is tested on a real
// cluster: internal/testing/e2e's TestGaleraRefusesMultiWriter.)
func TestSingleWriterOption(t *testing.T) {
	ctx := context.Background()
	for _, d := range []sqllock.Dialect{sqllock.Postgres, testdb.MySQL()} {
		t.Run(d.String(), func(t *testing.T) {
			db := testdb.Open(t, d)
			for name, mk := range map[string]func() (sqllock.Locker, error){
				"tablelock":  func() (sqllock.Locker, error) { return tablelock.New(db.DB, d, tablelock.WithSingleWriter(true)) },
				"rowlock":    func() (sqllock.Locker, error) { return rowlock.New(db.DB, d, rowlock.WithSingleWriter(true)) },
				"advisory":   func() (sqllock.Locker, error) { return advisory.New(db.DB, d, advisory.WithSingleWriter(true)) },
				"optimistic": func() (sqllock.Locker, error) { return optimistic.New(db.DB, d, optimistic.WithSingleWriter(true)) },
			} {
				l, err := mk()
				if err != nil {
					t.Fatalf("%s with WithSingleWriter(true): %v", name, err)
				}
				lease, err := l.TryAcquire(ctx, locktest.Key(t)+"/"+name)
				if err != nil {
					t.Fatalf("%s with WithSingleWriter(true): TryAcquire: %v", name, err)
				}
				if err := lease.Release(ctx); err != nil {
					t.Fatalf("%s: Release: %v", name, err)
				}
				if err := l.(interface{ Close() error }).Close(); err != nil {
					t.Fatal(err)
				}
			}
			g, err := jobguard.New(db.DB, d, jobguard.WithSingleWriter(true))
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ran, err := g.Run(ctx, jobguard.Job{Name: locktest.Key(t) + "/job", AtMost: time.Minute}, func(context.Context) error { return nil })
			if err != nil || !ran {
				t.Fatalf("jobguard with WithSingleWriter(true): ran %v, %v", ran, err)
			}
		})
	}
}
