package dberr

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"
)

// The classifiers below read the drivers' errors without importing the
// drivers: importing github.com/go-sql-driver/mysql or modernc.org/sqlite
// registers a database/sql driver name at init, and an application that
// registers its own driver under that name would panic at start-up. pgx
// and modernc expose their codes through methods; the MySQL driver's error
// is read by reflection (dberr.go).

// pgError is what *pgconn.PgError offers: the SQLSTATE of a server error.
type pgError interface{ SQLState() string }

// safeToRetry is pgconn's promise that a failed request never reached the
// server.
type safeToRetry interface{ SafeToRetry() bool }

// pgCode returns the SQLSTATE of a PostgreSQL server error in err's chain.
func pgCode(err error) (string, bool) {
	var pe pgError
	if !errors.As(err, &pe) {
		return "", false
	}
	// MySQL's error has a SQLState field, not a method: only pgconn's
	// type answers here.
	return pe.SQLState(), true
}

// sqliteCode returns the primary result code of a modernc.org/sqlite error
// in err's chain (SQLITE_BUSY is 5, whatever its extended code).
func sqliteCode(err error) (int, bool) {
	var found int
	ok := Walk(err, func(e error) bool {
		c, isCoder := e.(interface{ Code() int })
		if !isCoder || !fromPackage(e, "modernc.org/sqlite") {
			return false
		}
		found = c.Code() & 0xff
		return true
	})
	return found, ok
}

// fromPackage reports whether err's type (or the type it points to) is
// declared in the package at path pkg.
func fromPackage(err error, pkg string) bool {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == pkg
}

// IsRetryable reports whether err is transient: retrying the same statement,
// perhaps on another connection, may succeed. Serialization failures,
// deadlocks, lock-wait timeouts, SQLite busy errors and dropped connections
// are; constraint violations and syntax errors are not. Context errors are
// not: the caller's deadline is final.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if IsDeadlock(err) || IsConnLoss(err) || IsBusy(err) {
		return true
	}
	if code, ok := pgCode(err); ok {
		switch code {
		case "40001", "55P03", "53300", "57P03": // serialization, lock not available, too many connections, cannot connect now
			return true
		}
		return false
	}
	if n, ok := MySQLNumber(err); ok {
		switch n {
		case 1205, 1040, 1203: // lock wait timeout, too many connections, user has too many connections
			return true
		}
	}
	return false
}

// IsBusy reports SQLite's SQLITE_BUSY or SQLITE_LOCKED: another connection
// holds the lock the statement needed.
func IsBusy(err error) bool {
	code, ok := sqliteCode(err)
	return ok && (code == 5 || code == 6)
}

// IsDeadlock reports whether the server chose this statement as a deadlock
// victim (PostgreSQL 40P01, MySQL 1213).
func IsDeadlock(err error) bool {
	if code, ok := pgCode(err); ok {
		return code == "40P01"
	}
	n, ok := MySQLNumber(err)
	return ok && n == 1213
}

// IsLockNotAvailable reports a NOWAIT or lock-timeout refusal
// (PostgreSQL 55P03, MySQL 3572 and 1205).
func IsLockNotAvailable(err error) bool {
	if code, ok := pgCode(err); ok {
		return code == "55P03"
	}
	n, ok := MySQLNumber(err)
	return ok && (n == 3572 || n == 1205)
}

// IsConnLoss reports whether err says the session is gone: the server
// terminated it, the network dropped it, or the driver marked it bad.
func IsConnLoss(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) || isMySQLInvalidConn(err) {
		return true
	}
	if code, ok := pgCode(err); ok {
		// Class 08: connection exception; 57P01-02: admin or crash shutdown.
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02"
	}
	if n, ok := MySQLNumber(err); ok {
		switch n {
		case 1053, 1927, 2006, 2013, 4031: // shutdown, connection killed, gone away, lost, disconnected
			return true
		}
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var str safeToRetry
	return errors.As(err, &str) && str.SafeToRetry()
}

// NeverSent reports whether err promises that the failed request never
// reached the server, so running it again cannot run it twice:
// driver.ErrBadConn (database/sql's contract: a driver returns it only
// before anything was sent) or pgconn's SafeToRetry. A lost connection
// without that promise leaves a write in doubt.
func NeverSent(err error) bool {
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var str safeToRetry
	return errors.As(err, &str) && str.SafeToRetry()
}
