package rowlock

import "github.com/sqllock/sqllock"

// SQLite locks the whole database for a writer and has no row locks to
// serve: New, Schema and LockRows refuse it and name the alternative.
func init() {
	unsupported[sqllock.SQLite] = "SQLite has no SELECT ... FOR UPDATE row locks; use tablelock"
}
