package jobguard

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// Schema returns the DDL of a job table named table for d: the table
// migrations 00004 and 00006 leave under DefaultTable, for use with
// WithTable. A test keeps the two identical. The fencing sequence comes
// from the migrations alone.
//
// Names and owners compare byte for byte on every dialect; on MySQL they are
// varbinary, as MariaDB's default collation ignores case and trailing
// spaces. A table made on MySQL by an earlier release has a varchar owner:
// run "ALTER TABLE name MODIFY owner varbinary(64) NOT NULL" on it, as
// migration 00006 does for DefaultTable.
func Schema(d sqllock.Dialect, table string) (string, error) {
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return "", fmt.Errorf("jobguard: table: %w", err)
	}
	switch d {
	case sqllock.Postgres:
		return `CREATE TABLE ` + t + ` (
    name         varchar(255) NOT NULL PRIMARY KEY,
    owner        varchar(64)  NOT NULL,
    locked_by    varchar(255) NOT NULL,
    token        bigint       NOT NULL,
    locked_at    timestamptz  NOT NULL,
    locked_until timestamptz  NOT NULL
);`, nil
	case sqllock.MySQL:
		return `CREATE TABLE ` + t + ` (
    name         varbinary(255) NOT NULL PRIMARY KEY,
    owner        varbinary(64)  NOT NULL,
    locked_by    varchar(255)   NOT NULL,
    token        bigint         NOT NULL,
    locked_at    datetime(6)    NOT NULL,
    locked_until datetime(6)    NOT NULL
) ENGINE=InnoDB;`, nil
	case sqllock.SQLite:
		return `CREATE TABLE ` + t + ` (
    name         TEXT    NOT NULL PRIMARY KEY,
    owner        TEXT    NOT NULL,
    locked_by    TEXT    NOT NULL,
    token        INTEGER NOT NULL,
    locked_at    INTEGER NOT NULL,
    locked_until INTEGER NOT NULL
);`, nil
	}
	return "", fmt.Errorf("jobguard: %w: dialect %v", sqllock.ErrUnsupported, d)
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
