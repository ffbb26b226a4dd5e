package sqlutil

import (
	"context"
	"database/sql"
	"strings"
)

// ExecScript runs the statements of script, separated by ';', one at a
// time, skipping empty ones, and stops at the first error. It splits on
// every ';': the script must have none inside a statement (no string
// literals or bodies holding one), as the DDL this module writes does not.
func ExecScript(ctx context.Context, db *sql.DB, script string) error {
	for _, stmt := range strings.Split(script, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}
