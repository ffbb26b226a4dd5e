package dberr

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite" // driver "sqlite", for a real SQLITE_BUSY
)

// The classifiers must recognise the drivers' real error values, wrapped
// and joined as callers wrap them, without importing the drivers.
func TestClassifyDriverErrors(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("acquire %q: %w", "k", err) }
	join := func(err error) error { return errors.Join(errors.New("first"), wrap(err)) }
	for _, tc := range []struct {
		name                                  string
		err                                   error
		retryable, deadlock, notAvail, connLo bool
	}{
		{"pg deadlock", &pgconn.PgError{Code: "40P01"}, true, true, false, false},
		{"pg serialization", &pgconn.PgError{Code: "40001"}, true, false, false, false},
		{"pg lock not available", &pgconn.PgError{Code: "55P03"}, true, false, true, false},
		{"pg admin shutdown", &pgconn.PgError{Code: "57P01"}, true, false, false, true},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, true, false, false, true},
		{"pg unique violation", &pgconn.PgError{Code: "23505"}, false, false, false, false},
		{"mysql deadlock", &mysql.MySQLError{Number: 1213}, true, true, false, false},
		{"mysql lock wait timeout", &mysql.MySQLError{Number: 1205}, true, false, true, false},
		{"mysql nowait", &mysql.MySQLError{Number: 3572}, false, false, true, false},
		{"mysql killed", &mysql.MySQLError{Number: 1927}, true, false, false, true},
		{"mysql duplicate key", &mysql.MySQLError{Number: 1062}, false, false, false, false},
		{"mysql invalid connection", mysql.ErrInvalidConn, true, false, false, true},
		{"bad conn", driver.ErrBadConn, true, false, false, true},
		{"context canceled", context.Canceled, false, false, false, false},
		{"plain", errors.New("syntax error"), false, false, false, false},
		{"look-alike text", errors.New("Error 1213 (40001): Deadlock found"), false, false, false, false},
	} {
		for _, form := range []struct {
			name string
			err  error
		}{{"bare", tc.err}, {"wrapped", wrap(tc.err)}, {"joined", join(tc.err)}} {
			err := form.err
			if got := IsRetryable(err); got != tc.retryable {
				t.Errorf("%s (%s): IsRetryable = %v, want %v", tc.name, form.name, got, tc.retryable)
			}
			if got := IsDeadlock(err); got != tc.deadlock {
				t.Errorf("%s (%s): IsDeadlock = %v, want %v", tc.name, form.name, got, tc.deadlock)
			}
			if got := IsLockNotAvailable(err); got != tc.notAvail {
				t.Errorf("%s (%s): IsLockNotAvailable = %v, want %v", tc.name, form.name, got, tc.notAvail)
			}
			if got := IsConnLoss(err); got != tc.connLo {
				t.Errorf("%s (%s): IsConnLoss = %v, want %v", tc.name, form.name, got, tc.connLo)
			}
		}
	}
}

// A real SQLITE_BUSY from modernc.org/sqlite: a second writer with no busy
// timeout while the first holds the write lock.
func TestClassifySQLiteBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	ctx := context.Background()
	if _, err := a.ExecContext(ctx, "CREATE TABLE x (v INTEGER)"); err != nil {
		t.Fatal(err)
	}
	tx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_, err = b.ExecContext(ctx, "INSERT INTO x VALUES (2)")
	if err == nil {
		t.Fatal("a second writer got through while the first held the write lock")
	}
	if !IsBusy(err) || !IsRetryable(err) || !IsBusy(fmt.Errorf("wrapped: %w", err)) {
		t.Fatalf("SQLite error %v (%T): IsBusy %v, IsRetryable %v; want both true", err, err, IsBusy(err), IsRetryable(err))
	}
	if IsConnLoss(err) || IsDeadlock(err) {
		t.Fatalf("SQLITE_BUSY %v classified as a lost connection or a deadlock", err)
	}
}

// safeErr stands for pgconn's errors that carry SafeToRetry (their types
// are unexported): the method is all NeverSent reads.
type safeErr bool

func (e safeErr) Error() string     { return "write failed" }
func (e safeErr) SafeToRetry() bool { return bool(e) }

func TestNeverSent(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"bad conn", driver.ErrBadConn, true},
		{"wrapped bad conn", fmt.Errorf("load: %w", driver.ErrBadConn), true},
		{"pgconn safe to retry", fmt.Errorf("store: %w", safeErr(true)), true},
		{"pgconn not safe", safeErr(false), false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false},
		{"mysql invalid connection", mysql.ErrInvalidConn, false},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, false},
		{"nil", nil, false},
	} {
		if got := NeverSent(tc.err); got != tc.want {
			t.Errorf("%s: NeverSent(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
