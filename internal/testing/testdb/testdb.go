// Package testdb finds the real databases the tests run against.
//
// PostgreSQL and MySQL/MariaDB come from SQLLOCK_POSTGRES_DSN and
// SQLLOCK_MYSQL_DSN. When a variable is unset, a throwaway container is
// started with dockertest. When neither works the test is skipped with the
// reason, except with CI=true, where a missing database fails the run.
// SQLite runs in a temporary file (SQLLOCK_SQLITE_PATH, when set, names it,
// so child processes share their parent's database).
package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite" // driver "sqlite"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/migrations"
)

// Environment variables read by Open.
const (
	EnvPostgres = "SQLLOCK_POSTGRES_DSN"
	EnvMySQL    = "SQLLOCK_MYSQL_DSN"
	EnvSQLite   = "SQLLOCK_SQLITE_PATH"
	// EnvMySQLCommon=1 runs the tests on the MySQL path alone
	// (sqllock.MySQL) against SQLLOCK_MYSQL_DSN: on MariaDB, in
	// the subset of statements MySQL 8 also runs.
	EnvMySQLCommon = "SQLLOCK_MYSQL_COMMON"
	// EnvMySQL8 names a real MySQL 8 server, which no test here starts.
	EnvMySQL8 = "SQLLOCK_MYSQL8_DSN"
)

// Dialects lists every dialect, in the order tests run them; with
// SQLLOCK_MYSQL_COMMON=1, MySQL alone.
var Dialects = dialects()

func dialects() []sqllock.Dialect {
	if CommonMode() {
		return []sqllock.Dialect{sqllock.MySQL}
	}
	return []sqllock.Dialect{sqllock.Postgres, sqllock.MariaDB, sqllock.SQLite}
}

// CommonMode reports whether SQLLOCK_MYSQL_COMMON=1 asks for the MySQL
// path alone.
func CommonMode() bool { return os.Getenv(EnvMySQLCommon) == "1" }

// MySQL is the MySQL-family dialect the tests run: sqllock.MySQL in
// common mode, sqllock.MariaDB otherwise.
func MySQL() sqllock.Dialect {
	if CommonMode() {
		return sqllock.MySQL
	}
	return sqllock.MariaDB
}

// DB is a migrated test database.
type DB struct {
	*sql.DB
	Dialect sqllock.Dialect
	Driver  string // database/sql driver name
	DSN     string
	baseDSN string // sqllock.MySQL: the DSN given, before commonDatabase
}

type result struct {
	db   *DB
	skip string
	err  error
}

var (
	mu     sync.Mutex
	opened = map[sqllock.Dialect]*result{}
)

// Open returns the shared, migrated database for d, opened once per process.
// It skips (or, with CI=true, fails) the test when d has no server.
func Open(t testing.TB, d sqllock.Dialect) *DB {
	t.Helper()
	mu.Lock()
	r, ok := opened[d]
	if !ok {
		r = open(d)
		opened[d] = r
	}
	mu.Unlock()
	switch {
	case r.err != nil:
		t.Fatalf("testdb: %v: %v", d, r.err)
	case r.skip != "":
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdb: %v unavailable and CI=true: %s", d, r.skip)
		}
		t.Skipf("SKIPPING %v TESTS: %s", d, r.skip)
	}
	return r.db
}

// Fresh opens a second handle on d's database with at most maxOpen
// connections (0: unlimited), closed when the test ends.
func Fresh(t testing.TB, d sqllock.Dialect, maxOpen int) *DB {
	t.Helper()
	shared := Open(t, d)
	db := openWith(t, shared, shared.DSN)
	db.SetMaxOpenConns(maxOpen)
	t.Cleanup(func() { db.Close() })
	return db
}

func openWith(t testing.TB, shared *DB, dsn string) *DB {
	t.Helper()
	db, err := sql.Open(shared.Driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return &DB{DB: db, Dialect: shared.Dialect, Driver: shared.Driver, DSN: dsn}
}

// ForEach runs fn as a subtest per dialect.
func ForEach(t *testing.T, fn func(t *testing.T, db *DB)) {
	for _, d := range Dialects {
		t.Run(d.String(), func(t *testing.T) { fn(t, Open(t, d)) })
	}
}

// Env returns the variables a child process needs to reach the same
// databases as this one.
func Env() []string {
	mu.Lock()
	defer mu.Unlock()
	var env []string
	for d, r := range opened {
		if r.db == nil {
			continue
		}
		switch d {
		case sqllock.Postgres:
			env = append(env, EnvPostgres+"="+r.db.DSN)
		case sqllock.MariaDB:
			env = append(env, EnvMySQL+"="+r.db.DSN)
		case sqllock.MySQL:
			env = append(env, EnvMySQL+"="+r.db.baseDSN)
		case sqllock.SQLite:
			env = append(env, EnvSQLite+"="+SQLitePath(r.db.DSN))
		}
	}
	return env
}

// Child returns a command that re-runs this test binary for the single test
// named run, with the databases of this process and extra environment.
func Child(t testing.TB, run string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), Env()...), extra...)
	return cmd
}

func open(d sqllock.Dialect) *result {
	var driver, dsn string
	switch d {
	case sqllock.Postgres:
		driver, dsn = "pgx", os.Getenv(EnvPostgres)
	case sqllock.MariaDB, sqllock.MySQL:
		driver, dsn = "mysql", os.Getenv(EnvMySQL)
	case sqllock.SQLite:
		driver = "sqlite"
		path := os.Getenv(EnvSQLite)
		if path == "" {
			dir, err := os.MkdirTemp("", "sqllock-test-")
			if err != nil {
				return &result{err: err}
			}
			path = filepath.Join(dir, "sqllock.db")
		}
		dsn = SQLiteDSN(path)
	default:
		return &result{err: fmt.Errorf("unknown dialect %v", d)}
	}
	if dsn == "" {
		var why string
		dsn, why = startContainer(d)
		if dsn == "" {
			return &result{skip: why}
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return &result{err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitPing(ctx, db); err != nil {
		db.Close()
		return &result{skip: fmt.Sprintf("cannot reach %v at %s: %v", d, redact(dsn), err)}
	}
	base := dsn
	if d == sqllock.MySQL {
		db, dsn, err = commonDatabase(ctx, db, dsn)
		if err != nil {
			return &result{err: err}
		}
	}
	if err := migrations.Up(ctx, db, d); err != nil {
		db.Close()
		return &result{err: err}
	}
	return &result{db: &DB{DB: db, Dialect: d, Driver: driver, DSN: dsn, baseDSN: base}}
}

// SQLiteDSN is the modernc.org/sqlite DSN the tests and the command use:
// WAL so readers do not block the writer, and a busy timeout so writers
// queue instead of failing at once.
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// SQLiteFile opens a migrated SQLite database of the test's own, in WAL
// mode with a busy timeout of busyMS, closed when the test ends.
func SQLiteFile(t testing.TB, busyMS int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "db.sqlite")+"?_pragma=busy_timeout("+strconv.Itoa(busyMS)+")&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(context.Background(), db, sqllock.SQLite); err != nil {
		t.Fatal(err)
	}
	return db
}

// SQLitePath is the file a SQLite DSN of SQLiteDSN's form names.
func SQLitePath(dsn string) string {
	p := strings.TrimPrefix(dsn, "file:")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	return p
}

func waitPing(ctx context.Context, db *sql.DB) error {
	for {
		err := db.PingContext(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		if j := strings.LastIndex(dsn[:i], ":"); j >= 0 && !strings.Contains(dsn[:j], "@") && strings.Contains(dsn[:j], "//") {
			return dsn[:j] + ":***" + dsn[i:]
		}
	}
	return dsn
}

// startContainer starts a throwaway server with dockertest and returns its
// DSN, or why it could not.
func startContainer(d sqllock.Dialect) (dsn, why string) {
	if d == sqllock.MySQL {
		d = sqllock.MariaDB
	}
	env := map[sqllock.Dialect]string{sqllock.Postgres: EnvPostgres, sqllock.MariaDB: EnvMySQL}[d]
	pool, err := dockertest.NewPool("")
	if err == nil {
		err = pool.Client.Ping()
	}
	if err != nil {
		return "", fmt.Sprintf("%s is unset and no Docker engine answers for dockertest (%v)", env, err)
	}
	pool.MaxWait = 90 * time.Second
	var opts dockertest.RunOptions
	switch d {
	case sqllock.Postgres:
		opts = dockertest.RunOptions{Repository: "postgres", Tag: "16", Env: []string{"POSTGRES_HOST_AUTH_METHOD=trust", "POSTGRES_DB=test"}}
	case sqllock.MariaDB:
		opts = dockertest.RunOptions{Repository: "mariadb", Tag: "10.11", Env: []string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1", "MARIADB_DATABASE=test"}}
	}
	res, err := pool.RunWithOptions(&opts, func(hc *docker.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return "", fmt.Sprintf("%s is unset and dockertest could not start a container: %v", env, err)
	}
	_ = res.Expire(600) // the container outlives no test run by long
	switch d {
	case sqllock.Postgres:
		dsn = "postgres://postgres@" + res.GetHostPort("5432/tcp") + "/test?sslmode=disable"
	case sqllock.MariaDB:
		dsn = "root@tcp(" + res.GetHostPort("3306/tcp") + ")/test"
	}
	driver := map[sqllock.Dialect]string{sqllock.Postgres: "pgx", sqllock.MariaDB: "mysql"}[d]
	if err := pool.Retry(func() error {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Ping()
	}); err != nil {
		return "", fmt.Sprintf("container for %v never answered: %v", d, err)
	}
	return dsn, ""
}

// Scratch creates a private, empty database on d's server (a new file for
// SQLite), not migrated, dropped when the test ends: for tests that migrate
// up and down, or need a database that was never migrated.
func Scratch(t testing.TB, d sqllock.Dialect) *DB {
	t.Helper()
	if d == sqllock.SQLite {
		s := &DB{Dialect: d, Driver: "sqlite", DSN: SQLiteDSN(filepath.Join(t.TempDir(), "scratch.db"))}
		return scratchOpen(t, s)
	}
	shared := Open(t, d)
	name := fmt.Sprintf("sqllock_scratch_%d_%d", os.Getpid(), scratchSeq.Add(1))
	if _, err := shared.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	s := &DB{Dialect: d, Driver: shared.Driver}
	switch d {
	case sqllock.Postgres:
		u, err := url.Parse(shared.DSN)
		if err != nil || u.Scheme == "" {
			t.Skipf("the PostgreSQL DSN is not a URL; scratch databases need one")
		}
		u.Path = "/" + name
		s.DSN = u.String()
	case sqllock.MariaDB, sqllock.MySQL:
		cfg, err := mysql.ParseDSN(shared.DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		s.DSN = cfg.FormatDSN()
	}
	t.Cleanup(func() {
		drop := "DROP DATABASE " + name
		if d == sqllock.Postgres {
			drop += " WITH (FORCE)"
		}
		if _, err := shared.Exec(drop); err != nil {
			t.Errorf("drop scratch database %s: %v", name, err)
		}
	})
	return scratchOpen(t, s)
}

var scratchSeq atomic.Int64

func scratchOpen(t testing.TB, s *DB) *DB {
	t.Helper()
	db, err := sql.Open(s.Driver, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s.DB = db
	return s
}

// VerifyNoLeaks runs the package's tests, then fails the run if a goroutine
// outlives them (a renewal loop, a listener, a monitor that did not stop).
// The shared database handles stay open on purpose: their pool goroutines
// are not leaks.
func VerifyNoLeaks(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/internal/bgreader.(*BGReader).bgRead"),
		// toxiproxy's own: removing a toxic from a link whose peer is gone
		// can leave the link's pipe blocked on a send, inside the tool; its
		// bandwidth toxic sends a split packet without select, and blocks
		// for good once the link stopped reading; and a link's reader,
		// copying a connection into the first toxic's channel, blocks for
		// good on that send once that toxic has gone.
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
	)
}

// commonDatabase moves the MySQL path's tests to a database of their own
// beside dsn's, "<name>_common": one database is served by one path (the
// sequence and the tickets are two counters), and the other tests run the
// MariaDB path on dsn's database, with fence resources of fixed names.
func commonDatabase(ctx context.Context, db *sql.DB, dsn string) (*sql.DB, string, error) {
	defer db.Close()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", err
	}
	cfg.DBName += "_common"
	// Made only when missing: an application role that may not create
	// databases finds it made and migrated for it (.ci/step-roles), and
	// MariaDB refuses it CREATE DATABASE IF NOT EXISTS even then.
	var found int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?`, cfg.DBName).Scan(&found); err != nil {
		return nil, "", err
	}
	if found == 0 {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+cfg.DBName+"`"); err != nil {
			return nil, "", err
		}
	}
	dsn = cfg.FormatDSN()
	common, err := sql.Open("mysql", dsn)
	return common, dsn, err
}
