package fence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sqllock/sqllock"
)

// Schema returns the DDL of a fence table named table for d: the table
// migration 00005 creates under DefaultTable, for a resource in another
// database or for WithTable. A test keeps it identical to the shipped
// migration.
func Schema(d sqllock.Dialect, table string) (string, error) {
	st, err := storeFor(d, table)
	if err != nil {
		return "", err
	}
	return st.schema(), nil
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
