package rowlock

import (
	"fmt"

	"github.com/sqllock/sqllock"
)

// Schema returns the DDL of a row-lock table named table for d: the table
// the migrations create under DefaultTable, for use with WithTable. A test
// keeps it identical to the shipped migration. The fencing sequence is
// shared by every table and comes from the migrations alone.
func Schema(d sqllock.Dialect, table string) (string, error) {
	dl, err := dialectOf(d, "rowlock: ")
	if err != nil {
		return "", err
	}
	t, err := dl.quote(table)
	if err != nil {
		return "", fmt.Errorf("rowlock: table: %w", err)
	}
	return dl.schema(t), nil
}
