package tablelock

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// Schema returns the DDL of a lock table named table for d: the table the
// migrations leave under DefaultTable, for use with WithTable. A test keeps
// the two identical. The fencing sequence is shared by every table and
// comes from the migrations alone.
//
// Keys and owners compare byte for byte on every dialect; on MySQL they are
// varbinary, as MariaDB's default collation ignores case and trailing
// spaces. A table made on MySQL by an earlier release has a varchar owner:
// run "ALTER TABLE name MODIFY owner varbinary(64) NOT NULL" on it, as
// migration 00006 does for DefaultTable.
func Schema(d sqllock.Dialect, table string) (string, error) {
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return "", fmt.Errorf("tablelock: table: %w", err)
	}
	// The index name must be unique per schema on PostgreSQL and SQLite.
	idx, err := sqlutil.QuoteIdent(d, strings.ReplaceAll(table, ".", "_")+"_expires_at")
	if err != nil {
		return "", fmt.Errorf("tablelock: table: %w", err)
	}
	switch d {
	case sqllock.Postgres:
		return `CREATE TABLE ` + t + ` (
    lock_key    varchar(255) NOT NULL PRIMARY KEY,
    owner       varchar(64)  NOT NULL,
    host        varchar(255) NOT NULL,
    hold_count  integer      NOT NULL,
    token       bigint       NOT NULL,
    acquired_at timestamptz  NOT NULL,
    expires_at  timestamptz  NOT NULL
);
CREATE INDEX ` + idx + ` ON ` + t + ` (expires_at);`, nil
	case sqllock.MySQL:
		return `CREATE TABLE ` + t + ` (
    lock_key    varbinary(255) NOT NULL PRIMARY KEY,
    owner       varbinary(64)  NOT NULL,
    host        varchar(255)   NOT NULL,
    hold_count  int            NOT NULL,
    token       bigint         NOT NULL,
    acquired_at datetime(6)    NOT NULL,
    expires_at  datetime(6)    NOT NULL,
    KEY ` + idx + ` (expires_at)
) ENGINE=InnoDB;`, nil
	case sqllock.SQLite:
		return `CREATE TABLE ` + t + ` (
    lock_key    TEXT    NOT NULL PRIMARY KEY,
    owner       TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    hold_count  INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX ` + idx + ` ON ` + t + ` (expires_at);`, nil
	}
	return "", fmt.Errorf("tablelock: %w: dialect %v", sqllock.ErrUnsupported, d)
}

// CreateTable creates a lock table named table for use with WithTable. Run
// migrations.Up first: the fencing sequence comes from there.
func CreateTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, table string) error {
	ddl, err := Schema(d, table)
	if err != nil {
		return err
	}
	if err := sqlutil.ExecScript(ctx, db, ddl); err != nil {
		return fmt.Errorf("tablelock: create table %s: %w", table, err)
	}
	return nil
}
