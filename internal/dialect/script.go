package dialect

import (
	"context"
	"database/sql"
	"strings"
)

// ExecScript runs the statements of script, separated by ';', one at a
// time, skipping empty ones, and stops at the first error. It splits on
// every ';' but those inside a CREATE TRIGGER's body (up to its "; END;"):
// the script must have none inside a statement otherwise (no string
// literals holding one), as the DDL this module writes does not.
func ExecScript(ctx context.Context, db *sql.DB, script string) error {
	var trigger string // a CREATE TRIGGER read up to its body's END
	for _, stmt := range strings.Split(script, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		// A trigger's body holds semicolons of its own: its statement
		// runs to the END that closes the body.
		if trigger != "" || strings.HasPrefix(strings.ToUpper(strings.TrimSpace(stmt)), "CREATE TRIGGER") {
			trigger += stmt + ";"
			if !strings.EqualFold(strings.TrimSpace(stmt), "END") {
				continue
			}
			stmt, trigger = trigger, ""
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}
