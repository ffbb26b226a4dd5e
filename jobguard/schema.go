package jobguard

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/tablelock"
)

// Schema returns the DDL of a job table named table for d: the table
// migrations 00004, 00006 and 00007 leave under DefaultTable, for use with
// WithTable. A test keeps the two identical. A job table is a lock table:
// this is tablelock.Schema, and its errors say so. The fencing sequence
// comes from the migrations alone.
//
// Names and owners compare byte for byte on every dialect; on MySQL they are
// varbinary, as MariaDB's default collation ignores case and trailing
// spaces. A job table made by an earlier release (columns name,
// locked_by, locked_at, locked_until) needs the steps of migration 00007,
// and on MySQL those of 00006 before them.
func Schema(d sqllock.Dialect, table string) (string, error) {
	return tablelock.Schema(d, table)
}

// CreateTable creates a job table named table for use with WithTable: it is
// tablelock.CreateTable. Run migrations.Up first: the fencing sequence
// comes from there.
func CreateTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, table string) error {
	return tablelock.CreateTable(ctx, db, d, table)
}
