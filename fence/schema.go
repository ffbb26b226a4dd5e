package fence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// Schema returns the DDL of a fence table named table for d: the table
// migration 00005 creates under DefaultTable, for a resource in another
// database or for WithTable. A test keeps it identical to the shipped
// migration.
func Schema(d sqllock.Dialect, table string) (string, error) {
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return "", fmt.Errorf("fence: table: %w", err)
	}
	switch d {
	case sqllock.Postgres:
		return `CREATE TABLE ` + t + ` (
    resource   varchar(255) NOT NULL PRIMARY KEY,
    last_token bigint       NOT NULL
);`, nil
	case sqllock.MySQL:
		return `CREATE TABLE ` + t + ` (
    resource   varbinary(255) NOT NULL PRIMARY KEY,
    last_token bigint         NOT NULL
) ENGINE=InnoDB;`, nil
	}
	return `CREATE TABLE ` + t + ` (
    resource   TEXT    NOT NULL PRIMARY KEY,
    last_token INTEGER NOT NULL
);`, nil
}

// CreateTable creates a fence table named table, in the database of the
// resources it will guard.
func CreateTable(ctx context.Context, db *sql.DB, d sqllock.Dialect, table string) error {
	ddl, err := Schema(d, table)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("fence: create table %s: %w", table, err)
	}
	return nil
}
