package dberr_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/dberr"
	"github.com/sqllock/sqllock/internal/testing/testdb"
)

// The server's own errors, not made-up ones: a missing function is 1305,
// a syntax error is something else, and no error is no number.
func TestMySQLNumber(t *testing.T) {
	db := testdb.Open(t, sqllock.MariaDB)
	ctx := context.Background()
	var n int
	err := db.QueryRowContext(ctx, "SELECT sqllock_no_such_function()").Scan(&n)
	if !dberr.IsMissingRoutine(err) {
		t.Fatalf("calling a missing function: %v, want IsMissingRoutine", err)
	}
	err = db.QueryRowContext(ctx, "SELEC 1").Scan(&n)
	if code, ok := dberr.MySQLNumber(err); !ok || code == 1305 || dberr.IsMissingRoutine(err) {
		t.Fatalf("a syntax error: %v gives %d, %v", err, code, ok)
	}
	if _, ok := dberr.MySQLNumber(nil); ok {
		t.Fatal("nil has a server error number")
	}
}
