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
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/backoff"
)

// FS holds the migrations: postgres/, mysql/ and sqlite/.
//
//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql
var FS embed.FS

// VersionTable is the goose version table sqllock uses.
const VersionTable = "sqllock_db_version"

// Dir returns the folder of FS that holds d's migrations.
func Dir(d sqllock.Dialect) (string, error) {
	switch d {
	case sqllock.Postgres, sqllock.MySQL, sqllock.SQLite:
		return d.String(), nil
	}
	return "", fmt.Errorf("migrations: %w: dialect %v", sqllock.ErrUnsupported, d)
}

// NewProvider returns a goose Provider over d's migrations with sqllock's
// version table and a session lock, so concurrent Up calls from several
// processes apply each migration once.
func NewProvider(db *sql.DB, d sqllock.Dialect) (*goose.Provider, error) {
	dir, err := Dir(d)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(FS, dir)
	if err != nil {
		return nil, err
	}
	gd := map[sqllock.Dialect]goose.Dialect{
		sqllock.Postgres: goose.DialectPostgres,
		sqllock.MySQL:    goose.DialectMySQL,
		sqllock.SQLite:   goose.DialectSQLite3,
	}[d]
	opts := []goose.ProviderOption{goose.WithTableName(VersionTable), goose.WithDisableGlobalRegistry(true)}
	if d != sqllock.SQLite { // SQLite serialises writers by itself
		opts = append(opts, goose.WithSessionLocker(sessionLocker{d: d}))
	}
	return goose.NewProvider(gd, db, sub, opts...)
}

// Up applies every pending migration for d.
func Up(ctx context.Context, db *sql.DB, d sqllock.Dialect) error {
	p, err := NewProvider(db, d)
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
	for attempt := 1; err != nil && d == sqllock.SQLite && attempt < 10; attempt++ {
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
	p, err := NewProvider(db, d)
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
	p, err := NewProvider(db, d)
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
	if d == sqllock.SQLite {
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
