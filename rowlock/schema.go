package rowlock

import (
	"fmt"

	"github.com/sqllock/sqllock"
	"github.com/sqllock/sqllock/internal/sqlutil"
)

// Schema returns the DDL of a row-lock table named table for d: the table
// the migrations create under DefaultTable, for use with WithTable. A test
// keeps it identical to the shipped migration. The fencing sequence is
// shared by every table and comes from the migrations alone.
func Schema(d sqllock.Dialect, table string) (string, error) {
	if d == sqllock.SQLite {
		return "", fmt.Errorf("rowlock: %w: SQLite has no SELECT ... FOR UPDATE row locks; use tablelock", sqllock.ErrUnsupported)
	}
	t, err := sqlutil.QuoteIdent(d, table)
	if err != nil {
		return "", fmt.Errorf("rowlock: table: %w", err)
	}
	if d == sqllock.MySQL {
		return `CREATE TABLE ` + t + ` (
    lock_key varbinary(255) NOT NULL PRIMARY KEY,
    token    bigint         NOT NULL DEFAULT 0
) ENGINE=InnoDB;`, nil
	}
	return `CREATE TABLE ` + t + ` (
    lock_key varchar(255) NOT NULL PRIMARY KEY,
    token    bigint       NOT NULL DEFAULT 0
);`, nil
}
