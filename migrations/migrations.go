// Package migrations ships the schema sqllock needs as goose migrations,
// one folder per dialect, embedded in the module.
//
// Up and Down run them through a goose Provider with its own version table
// (VersionTable), so they never touch goose's process-wide settings or an
// application's own goose_db_version. The same folders work with the goose
// command line:
//
//	goose -dir migrations/postgres -table sqllock_db_version postgres "$DSN" up
//
// Users of another migration tool can read the SQL from FS.
//
// # MySQL and MariaDB
//
// Both run the mysql/ folder; which of its statements run is chosen by the
// server, detected when the provider is made (sqllock.DetectServer), not
// by the dialect. MariaDB runs every file: the sequence of 00001 feeds the
// MariaDB dialect, the ticket table and function of 00010 the MySQL
// one, so a MariaDB database serves either path; since 00015 the function
// draws from the sequence there too, so both paths share one counter and a
// move between them keeps tokens growing. MySQL has no SEQUENCE:
// there the CREATE/DROP SEQUENCE lines of 00001 are left out (they never
// ran on a MySQL server, so no applied migration changes) and 00010 is
// its token source; so on a database created on a Galera node (a MariaDB
// database that becomes one keeps 00015's function, which then draws
// tickets above the sequence; back outside Galera, the MariaDB path's first
// draw of each Locker goes through the function, which raises the
// sequence past them: internal/server). 00010 and 00015 create a stored function,
// which, with binary logging on, needs SUPER or
// log_bin_trust_function_creators=1. Users of another migration tool on
// MySQL drop those two lines the same way, and on Galera also the MariaDB
// executable comments /*M! ... */ (see ForServer).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
	"github.com/sqllock/sqllock/internal/dialect"
)

// FS holds the migrations: postgres/, mysql/ and sqlite/.
//
//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql
var FS embed.FS

// VersionTable is the goose version table sqllock uses.
const VersionTable = "sqllock_db_version"

// Dir returns the folder of FS that holds d's migrations.
func Dir(d sqllock.Dialect) (string, error) {
	if dir := dialect.Of(d).MigrationDir; dir != "" {
		return dir, nil // the two MySQL-family paths share one
	}
	return "", fmt.Errorf("migrations: %w: dialect %v", sqllock.ErrUnsupported, d)
}

// NewProvider returns a goose Provider over d's migrations with sqllock's
// version table and a session lock, so concurrent Up calls from several
// processes apply each migration once. On MySQL and MariaDB it reads the
// server's flavour first (see the package doc).
func NewProvider(db *sql.DB, d sqllock.Dialect) (*goose.Provider, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return newProvider(ctx, db, d)
}

func newProvider(ctx context.Context, db *sql.DB, d sqllock.Dialect) (*goose.Provider, error) {
	dir, err := Dir(d)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(FS, dir)
	if err != nil {
		return nil, err
	}
	if dialect.Of(d).ProbesServer {
		srv, err := sqllock.DetectServer(ctx, db)
		if err != nil {
			return nil, err
		}
		if sub, err = ForServer(sub, srv); err != nil {
			return nil, err
		}
	}
	gd := map[sqllock.Dialect]goose.Dialect{
		sqllock.Postgres: goose.DialectPostgres,
		sqllock.MariaDB:  goose.DialectMySQL,
		sqllock.MySQL:    goose.DialectMySQL,
		sqllock.SQLite:   goose.DialectSQLite3,
	}[d]
	opts := []goose.ProviderOption{goose.WithTableName(VersionTable), goose.WithDisableGlobalRegistry(true)}
	if !dialect.Of(d).SerialWriters { // SQLite serialises writers by itself
		opts = append(opts, goose.WithSessionLocker(sessionLocker{d: d}))
	}
	return goose.NewProvider(gd, db, sub, opts...)
}

// Up applies every pending migration for d.
func Up(ctx context.Context, db *sql.DB, d sqllock.Dialect) error {
	p, err := newProvider(ctx, db, d)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	err = prepareVersionTable(ctx, db, d, p)
	if err == nil {
		_, err = p.Up(ctx)
	}
	// SQLite has no session lock: processes migrating one fresh file at
	// once collide (SQLITE_BUSY, a version row or table already there).
	// The loser retries and finds the work done.
	e := backoff.Exp{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	for attempt := 1; err != nil && dialect.Of(d).SerialWriters && attempt < 10; attempt++ {
		if backoff.Sleep(ctx, e.Next()) != nil {
			break
		}
		_, err = p.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("migrations: up (%v): %w", d, err)
	}
	return nil
}

// Down rolls back every sqllock migration for d. It drops the lock table and
// the fencing sequence: tokens issued afterwards start again from 1.
func Down(ctx context.Context, db *sql.DB, d sqllock.Dialect) error {
	p, err := newProvider(ctx, db, d)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("migrations: down (%v): %w", d, err)
	}
	return nil
}

// Pending reports whether d's migrations still have steps to apply: a
// database that needs `sqllock migrate up`.
func Pending(ctx context.Context, db *sql.DB, d sqllock.Dialect) (bool, error) {
	p, err := newProvider(ctx, db, d)
	if err != nil {
		return false, err
	}
	return p.HasPending(ctx)
}

// lockName identifies the migration lock on both servers; the init lock
// serialises the creation of the version table (see prepareVersionTable).
const (
	pgLockID      = 0x73716c6c6f636b // "sqllock"
	mysqlLock     = "sqllock_migrations"
	pgInitLockID  = pgLockID + 1
	mysqlInitLock = "sqllock_migrations_init"
)

// prepareVersionTable creates the version table, with its zero row, under
// a session lock of its own. goose's Up first asks HasPending, which
// creates the table WITHOUT its session lock; on MySQL, where CREATE TABLE
// commits by itself, a replica starting at the same moment then sees the
// table without its zero row and fails with "missing zero version
// migration". The lock is not goose's, which Up takes next on another
// connection.
func prepareVersionTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, p *goose.Provider) error {
	if dialect.Of(d).SerialWriters {
		return nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	l := sessionLocker{d: d, pgID: pgInitLockID, name: mysqlInitLock}
	if err := l.SessionLock(ctx, conn); err != nil {
		return err
	}
	defer l.SessionUnlock(context.WithoutCancel(ctx), conn)
	_, err = p.HasPending(ctx)
	return err
}

// sessionLocker blocks on a server-side lock bounded by the context; goose's
// own lockers poll every few seconds, which would slow parallel test runs.
type sessionLocker struct {
	d    sqllock.Dialect
	pgID int64  // 0: pgLockID
	name string // "": mysqlLock
}

func (s sessionLocker) ids() (int64, string) {
	if s.pgID == 0 {
		return pgLockID, mysqlLock
	}
	return s.pgID, s.name
}

func (s sessionLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	pgID, name := s.ids()
	if s.d == sqllock.Postgres {
		_, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", pgID)
		return err
	}
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5)", name).Scan(&got); err != nil {
			return err
		}
		if got.Valid && got.Int64 == 1 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (s sessionLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	pgID, name := s.ids()
	if s.d == sqllock.Postgres {
		_, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", pgID)
		return err
	}
	_, err := conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", name)
	return err
}

// ForServer returns the mysql/ folder fsys as srv runs it: unchanged on
// MariaDB; without the CREATE SEQUENCE and DROP SEQUENCE lines on MySQL
// and on Galera nodes, which have no sequences (Galera refuses them with
// error 1235) and take their tokens from 00010's tickets; there also
// without MariaDB's executable comments, which use the sequence.
func ForServer(fsys fs.FS, srv sqllock.Server) (fs.FS, error) {
	if srv.MariaDB && !srv.Galera {
		return fsys, nil
	}
	out := fstest.MapFS{}
	err := fs.WalkDir(fsys, ".", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		var keep []string
		for _, line := range strings.SplitAfter(string(b), "\n") {
			up := strings.ToUpper(strings.TrimSpace(line))
			if strings.HasPrefix(up, "CREATE SEQUENCE ") || strings.HasPrefix(up, "DROP SEQUENCE ") {
				continue
			}
			keep = append(keep, line)
		}
		// MariaDB's executable comments read the sequence: a Galera node
		// would run them, MySQL skips them.
		text := mariaDBComment.ReplaceAllString(strings.Join(keep, ""), "")
		out[path] = &fstest.MapFile{Data: []byte(text), Mode: 0o444}
		return nil
	})
	return out, err
}

// mariaDBComment matches an executable comment, on one line or several
// (the MariaDB part of a function body).
var mariaDBComment = regexp.MustCompile(`(?s)/\*M!.*?\*/`)
