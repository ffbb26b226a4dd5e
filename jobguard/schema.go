package jobguard

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/rowlease"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// Schema returns the DDL of a job table named table for d: the table
// migrations 00004, 00006 and 00007 leave under DefaultTable, for use with
// WithTable. A test keeps the two identical. A job table has the lock
// table's shape: Schema returns what tablelock.Schema does. The fencing
// sequence comes from the migrations alone.
//
// Names and owners compare byte for byte on every dialect; on MySQL they are
// varbinary, as MariaDB's default collation ignores case and trailing
// spaces. A job table made by an earlier release (columns name,
// locked_by, locked_at, locked_until) needs the steps of migration 00007,
// and on MySQL those of 00006 before them.
func Schema(d sqllock.Dialect, table string) (string, error) {
	ddl, err := rowlease.Schema(d, table)
	if err != nil {
		return "", fmt.Errorf("jobguard: %w", err)
	}
	return ddl, nil
}

// CreateTable creates a job table named table for use with WithTable. Run
// migrations.Up first: the fencing sequence comes from there.
func CreateTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, table string) error {
	ddl, err := Schema(d, table)
	if err != nil {
		return err
	}
	if err := sqlutil.ExecScript(ctx, db, ddl); err != nil {
		return fmt.Errorf("jobguard: create table %s: %w", table, err)
	}
	return nil
}
