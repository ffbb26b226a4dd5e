// Package dialect holds what differs between the dialects outside the
// stores' SQL: a table of capabilities per dialect, which code outside a
// store asks instead of comparing dialects, and the facts shared by the
// strategies: identifier quoting, channel names, the token expression,
// reading timestamp columns and running DDL scripts. Driver errors are
// classified in internal/dberr.
package dialect

import (
	"strconv"

	"github.com/sqllock/sqllock"
)

// Caps is what a dialect can do, as the code outside its stores needs to
// know it.
type Caps struct {
	// Name is the database's name for people: "PostgreSQL", "MariaDB",
	// "MySQL", "SQLite".
	Name string
	// Announces: releases are announced to waiters (PostgreSQL's
	// LISTEN/NOTIFY), and sessions listening can be counted.
	Announces bool
	// Gates: a key's waiters wait on a gate, a session lock named for the
	// key (MariaDB's GET_LOCK with a timeout), which the server can list.
	Gates bool
	// QueuedWaiters: a lock table's row keeps the queue of the Lockers
	// waiting for it (PostgreSQL, migration 00016).
	QueuedWaiters bool
	// SessionLocks: the server has advisory locks held by a session
	// (pg_advisory_lock, GET_LOCK); SQLite has none.
	SessionLocks bool
	// RowLocks: a transaction can hold row locks (FOR UPDATE) that the
	// server lists by transaction, not by key (rowlock's leases).
	RowLocks bool
	// TxLocks: the server has advisory locks that the transaction's end
	// releases (pg_advisory_xact_lock).
	TxLocks bool
	// LockWaiters: the server lists the sessions waiting for a session
	// lock, with who holds it (pg_locks).
	LockWaiters bool
	// SerialWriters: the database serialises writers by itself (SQLite):
	// no lock is needed around a migration, and a second writer's
	// statement fails busy instead of waiting.
	SerialWriters bool
	// ProbesServer: the guarantees depend on what server answers (MySQL
	// or MariaDB, a Galera node, the token function migrated), which a
	// Locker reads at its first take (internal/server).
	ProbesServer bool
	// Sequences: fencing tokens come from a sequence the statement that
	// takes the lock draws (PostgreSQL, MariaDB); a Galera node has none.
	Sequences bool
	// TicketTokens: fencing tokens come from an AUTO_INCREMENT ticket
	// table through sqllock_next_token(), drawn after the lock is held
	// (the MySQL path).
	TicketTokens bool
	// Embedded: the database is a file the process opens itself.
	Embedded bool
	// TimeMicros: the lock tables keep times as microseconds since the
	// Unix epoch, not as timestamps (SQLite).
	TimeMicros bool
	// NumberedParams: statements number their parameters ($1), rather than
	// marking them (?).
	NumberedParams bool
	// MigrationDir is the folder of migrations.FS with the dialect's
	// migrations: the two MySQL-family paths share one.
	MigrationDir string
	// quote opens and closes a quoted identifier.
	quote string
}

var caps = map[sqllock.Dialect]Caps{
	sqllock.Postgres: {
		Name:      "PostgreSQL",
		Announces: true, QueuedWaiters: true, SessionLocks: true, RowLocks: true, TxLocks: true, LockWaiters: true,
		Sequences: true, NumberedParams: true, MigrationDir: "postgres", quote: `"`,
	},
	sqllock.MariaDB: {
		Name:  "MariaDB",
		Gates: true, SessionLocks: true, RowLocks: true, ProbesServer: true, Sequences: true, MigrationDir: "mysql", quote: "`",
	},
	sqllock.MySQL: {
		Name:         "MySQL",
		SessionLocks: true, RowLocks: true, ProbesServer: true, TicketTokens: true, MigrationDir: "mysql", quote: "`",
	},
	// SQLite takes backticks too: a double-quoted name it cannot resolve
	// silently becomes a string literal, a backticked one is an error.
	sqllock.SQLite: {
		Name:          "SQLite",
		SerialWriters: true, Embedded: true, TimeMicros: true, MigrationDir: "sqlite", quote: "`",
	},
}

// Of returns d's capabilities; an unknown dialect has none.
func Of(d sqllock.Dialect) Caps { return caps[d] }

// Param returns the marker of a statement's i-th parameter, from 1.
func (c Caps) Param(i int) string {
	if c.NumberedParams {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}
