package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Locker hands out leases on string keys.
//
// Implementations live in the strategy packages (tablelock, rowlock,
// optimistic, advisory). All of them are safe for concurrent use.
type Locker interface {
	// Acquire blocks until the key is held or ctx ends. When ctx ends first
	// the error matches both ErrNotAcquired and ctx.Err().
	Acquire(ctx context.Context, key string) (Lease, error)
	// TryAcquire returns at once: a lease, or an error matching
	// ErrNotAcquired when someone else holds the key.
	TryAcquire(ctx context.Context, key string) (Lease, error)
}

// Lease is one holding of a key.
type Lease interface {
	// Key is the key the lease holds.
	Key() string
	// Token is the fencing token: strictly larger for each new holder of a
	// key. Hand it to the protected resource so it can refuse stale writers.
	Token() int64
	// Done is closed when the lease ends, by Release or by loss.
	Done() <-chan struct{}
	// Err is nil while the lease is held, matches ErrLockLost after a loss
	// and ErrReleased after Release.
	Err() error
	// Release gives the key back. It is safe to defer: the first call after a
	// loss returns ErrLockLost, any second call ErrReleased.
	Release(ctx context.Context) error
}

// Execer runs a statement. *sql.DB, *sql.Tx, *sql.Conn and the sqlx types
// that wrap them all satisfy it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier runs statements and reads rows: the handle the packages that work
// inside the caller's own transaction take (fence, rowlock.LockRows,
// optimistic). *sql.DB, *sql.Tx, *sql.Conn, *sqlx.DB, *sqlx.Tx and
// *sqlx.Conn all satisfy it.
type Querier interface {
	Execer
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Sentinel errors. Strategies wrap them with the key and the strategy name;
// match them with errors.Is.
var (
	// ErrNotAcquired: the key is held by someone else.
	ErrNotAcquired = errors.New("lock not acquired")
	// ErrLockLost: the lease ended without Release (expired, taken over,
	// its session died).
	ErrLockLost = errors.New("lock lost")
	// ErrReleased: the lease was already released.
	ErrReleased = errors.New("lease already released")
	// ErrNotHeld: the caller does not hold the key it tried to release or renew.
	ErrNotHeld = errors.New("lock not held by caller")
	// ErrUnsupported: the call cannot be served, by the dialect, the
	// driver or the kind of lease; the error says which.
	ErrUnsupported = errors.New("unsupported")
	// ErrConflict: an optimistic write found the version moved.
	ErrConflict = errors.New("version conflict")
	// ErrStaleToken: a fenced write carried a token older than one already applied.
	ErrStaleToken = errors.New("stale fencing token")
	// ErrInvalidKey: the key is empty, too long or not valid UTF-8.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidOption: a constructor option is out of range.
	ErrInvalidOption = errors.New("invalid option")
	// ErrClosed: the Locker was closed; it hands out no more leases.
	ErrClosed = errors.New("locker closed")
)

// MaxKeyLen is the longest key, in bytes, that every strategy accepts. It
// matches the key column of the shipped migrations.
const MaxKeyLen = 255

// ValidateKey reports whether key can be used as a lock key: non-empty, at
// most MaxKeyLen bytes of valid UTF-8 with no NUL byte. The error matches
// ErrInvalidKey.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds the limit of %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key %q contains a NUL byte", ErrInvalidKey, key)
	}
	return nil
}

// Dialect names the SQL database a Locker talks to. The caller names it; the
// library never guesses from the driver.
type Dialect int

// The supported dialects. The oldest version of each that sqllock
// supports is its MinVersion.
const (
	// Postgres is PostgreSQL, through any database/sql driver;
	// LISTEN/NOTIFY wake-ups need github.com/jackc/pgx/v5/stdlib.
	Postgres Dialect = iota + 1
	// MariaDB is MariaDB through its own statements (sequences, RETURNING).
	// On a MySQL server or a Galera node use MySQL; ServerDialect picks
	// for you.
	MariaDB
	// SQLite is SQLite, the embedded default.
	SQLite
	// MySQL is the MySQL path: only statements that MySQL 8.0+ and
	// MariaDB 10.6+ both run (no SEQUENCE, RETURNING, SET STATEMENT,
	// WAIT n). Fencing tokens come from an AUTO_INCREMENT ticket table,
	// drawn after the lock is held. It serves MySQL 8.0/8.4 and, when
	// chosen, MariaDB.
	MySQL
)

// MinVersion returns the oldest server version sqllock supports for d,
// and "" for an unknown dialect. This is the one place the floors are
// stated; a test checks them against the features the statements use and
// the servers the tests run on, and the README's "Supported databases" quotes them.
//
//   - PostgreSQL 13: pg_current_xact_id (rowlock's loss check).
//   - MariaDB 10.6: sequences (10.3) and INSERT ... RETURNING (10.5); 10.5
//     has them all but is past its end of life.
//   - MySQL 8.0: FOR UPDATE NOWAIT and persistent AUTO_INCREMENT
//     counters (8.0); on a MariaDB server the MariaDB floor applies.
//   - SQLite 3.42: RETURNING (3.35) and unixepoch('subsec') (3.42), the
//     microsecond clock of the lock table. modernc.org/sqlite bundles a
//     newer one; this matters for other drivers.
func (d Dialect) MinVersion() string {
	switch d {
	case Postgres:
		return "13"
	case MariaDB:
		return "10.6"
	case SQLite:
		return "3.42"
	case MySQL:
		return "8.0"
	}
	return ""
}

// String returns "postgres", "mariadb", "sqlite" or "mysql".
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MariaDB:
		return "mariadb"
	case SQLite:
		return "sqlite"
	case MySQL:
		return "mysql"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Valid reports whether d is one of the named dialects.
func (d Dialect) Valid() bool { return d >= Postgres && d <= MySQL }

// IsMySQL reports whether d speaks to a MySQL-family server (MySQL or
// MariaDB): the dialect MariaDB or MySQL.
func (d Dialect) IsMySQL() bool { return d == MariaDB || d == MySQL }

// ParseDialect maps "postgres"/"postgresql"/"pgx", "mariadb",
// "mysql"/"mysql8"/"mysql-common" and "sqlite"/"sqlite3" to a Dialect.
// "mysql" is the MySQL path, which MariaDB runs too: both paths share one
// token counter and one GET_LOCK name per key, so a MariaDB user whose
// configuration says "mysql" is on a path that is correct there, only
// slower.
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "postgres", "postgresql", "pgx":
		return Postgres, nil
	case "mariadb":
		return MariaDB, nil
	case "sqlite", "sqlite3":
		return SQLite, nil
	case "mysql", "mysql8", "mysql-common":
		return MySQL, nil
	}
	return 0, fmt.Errorf("sqllock: unknown dialect %q (want postgres, mariadb, mysql or sqlite)", s)
}
