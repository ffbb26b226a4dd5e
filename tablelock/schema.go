package tablelock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/locktable"
)

// Schema returns the DDL of a lock table named table for d: the table the
// migrations leave under DefaultTable, for use with WithTable. A test keeps
// the two identical. The fencing sequence is shared by every table and
// comes from the migrations alone. jobguard's tables have the same shape.
//
// Keys and owners compare byte for byte on every dialect; on MySQL they are
// varbinary, as MariaDB's default collation ignores case and trailing
// spaces. A table made on MySQL by an earlier release has a varchar owner:
// run "ALTER TABLE name MODIFY owner varbinary(64) NOT NULL" on it, as
// migration 00006 does for DefaultTable. A table made on PostgreSQL by an
// earlier release lacks the wanted column (a waiter's mark, read by the
// release to announce the key only when someone waits): run "ALTER TABLE
// name ADD COLUMN wanted boolean NOT NULL DEFAULT false" on it, as
// migration 00008 does for DefaultTable. One that lacks the waiters and
// called columns (the waiting Lockers a release calls, one at a time)
// needs them, typed as migration 00016 types them (it converts the text
// columns of 00013 in every table of this shape):
//
//	ALTER TABLE name ADD COLUMN waiters sqllock_waiter[] NOT NULL DEFAULT '{}',
//	    ADD COLUMN called sqllock_waiter;
//
// On PostgreSQL and MySQL the table has no index on expires_at, which every take and release writes (on
// PostgreSQL it also has a fillfactor of 50, so those writes are HOT
// updates); for a table made by an earlier release, drop its expires_at
// index (and on PostgreSQL run "ALTER TABLE name SET (fillfactor = 50)"),
// as migration 00012 does for DefaultTable.
func Schema(d sqllock.Dialect, table string) (string, error) {
	ddl, err := locktable.Schema(d, table)
	if err != nil {
		return "", fmt.Errorf("tablelock: %w", err)
	}
	return ddl, nil
}

// CreateTable creates a lock table named table for use with WithTable. Run
// migrations.Up first: the fencing sequence comes from there.
func CreateTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, table string) error {
	if err := locktable.CreateTable(ctx, db, d, table); err != nil {
		return fmt.Errorf("tablelock: %w", err)
	}
	return nil
}
