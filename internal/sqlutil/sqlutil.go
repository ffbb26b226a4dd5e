// Package sqlutil holds the dialect details shared by the strategies:
// identifier validation and quoting, classification of driver errors,
// reading timestamp columns and running DDL scripts.
package sqlutil

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/sqllock/sqllock"
)

// MaxIdentLen is the longest identifier part accepted: PostgreSQL's limit,
// the smallest of the three dialects.
const MaxIdentLen = 63

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// QuoteIdent validates name as a table or column name, optionally
// schema-qualified ("schema.table"), and returns it quoted for d. Only
// letters, digits and underscores are accepted, so nothing a caller passes
// can change the shape of a statement.
func QuoteIdent(d sqllock.Dialect, name string) (string, error) {
	if !d.Valid() {
		return "", fmt.Errorf("%w: unknown dialect %v", sqllock.ErrInvalidOption, d)
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: identifier %q has more than one dot", sqllock.ErrInvalidOption, name)
	}
	for i, p := range parts {
		if len(p) == 0 || len(p) > MaxIdentLen || !identRE.MatchString(p) {
			return "", fmt.Errorf("%w: identifier %q: want letters, digits and underscores, 1 to %d long, not starting with a digit", sqllock.ErrInvalidOption, name, MaxIdentLen)
		}
		// SQLite takes backticks too: a double-quoted name it cannot
		// resolve silently becomes a string literal, a backticked one is an
		// error.
		if d == sqllock.Postgres {
			parts[i] = `"` + p + `"`
		} else {
			parts[i] = "`" + p + "`"
		}
	}
	return strings.Join(parts, "."), nil
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
	if IsDeadlock(err) || IsConnLoss(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "55P03", "53300", "57P03": // serialization, lock not available, too many connections, cannot connect now
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1205, 1040, 1203: // lock wait timeout, too many connections, user has too many connections
			return true
		}
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	return false
}

// IsDeadlock reports whether the server chose this statement as a deadlock
// victim (PostgreSQL 40P01, MySQL 1213).
func IsDeadlock(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213
	}
	return false
}

// IsLockNotAvailable reports a NOWAIT or lock-timeout refusal
// (PostgreSQL 55P03, MySQL 3572 and 1205).
func IsLockNotAvailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "55P03"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 3572 || me.Number == 1205
	}
	return false
}

// IsConnLoss reports whether err says the session is gone: the server
// terminated it, the network dropped it, or the driver marked it bad.
func IsConnLoss(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-02: admin or crash shutdown.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1053, 1927, 2006, 2013, 4031: // shutdown, connection killed, gone away, lost, disconnected
			return true
		}
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return pgconn.SafeToRetry(err)
}

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel on which releases
// of a lock table's keys are announced. Channel names are identifiers, at
// most 63 bytes; longer ones are hashed (a collision only wakes a waiter
// that then finds its key still held).
func NotifyChannel(table string) string {
	ch := "sqllock:" + strings.ToLower(table)
	if len(ch) <= 63 {
		return ch
	}
	h := fnv.New64a()
	h.Write([]byte(table))
	return fmt.Sprintf("sqllock:%016x", h.Sum64())
}
